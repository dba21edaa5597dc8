import pandas as pd
B='benchmarks/results/sim_calibration/h100_holdout8b/cells.csv'; C='benchmarks/results/sim_calibration/h100_holdout8c/cells.csv'
b=pd.read_csv(B); c=pd.read_csv(C)
m=b.merge(c,on=['kernel','shape','swizzle','config'],suffixes=('_b','_c'))
d=m[m.measured_delta_c.notna()&(m.swizzle!=m.baseline_c)].copy()
clear=lambda s:(d['measured_delta_'+s].abs()>=1)&((d['delta_ci_lo_'+s]>0)|(d['delta_ci_hi_'+s]<0))
d['clear_b']=clear('b'); d['clear_c']=clear('c')
d['swizzle']=d.swizzle.str.replace(r'\[.*\]','',regex=True)
t=d.assign(**{'8b delta [CI]':d.apply(lambda r:f"{r.measured_delta_b:+.2f} [{r.delta_ci_lo_b:+.2f}, {r.delta_ci_hi_b:+.2f}]"+(' *' if r.clear_b else ''),axis=1),
              '8c delta [CI]':d.apply(lambda r:f"{r.measured_delta_c:+.2f} [{r.delta_ci_lo_c:+.2f}, {r.delta_ci_hi_c:+.2f}]"+(' *' if r.clear_c else ''),axis=1),
              'change':(d.measured_delta_c-d.measured_delta_b).round(2),'predicted':d.pred_delta_c.round(2),
              'read 8b':d.measured_read_delta_b.round(2),'read 8c':d.measured_read_delta_c.round(2)})
print(t[['kernel','shape','swizzle','8b delta [CI]','8c delta [CI]','change','predicted','read 8b','read 8c']].to_markdown(index=False))
print(f"\n{len(d)} deltas; mean |change| {(d.measured_delta_c-d.measured_delta_b).abs().mean():.2f} points (read {(d.measured_read_delta_c-d.measured_read_delta_b).abs().mean():.2f}); "
      f"median CI half-width 8b {((d.delta_ci_hi_b-d.delta_ci_lo_b)/2).median():.2f}, 8c {((d.delta_ci_hi_c-d.delta_ci_lo_c)/2).median():.2f}; "
      f"mean launch spread of a cell's hit rate 8b {m.measured_hit_std_b.mean():.2f}, 8c {m.measured_hit_std_c.mean():.2f}; clear cells 8b {int(d.clear_b.sum())}, 8c {int(d.clear_c.sum())}, both {int((d.clear_b&d.clear_c).sum())} "
      f"(* = clear: |delta| >= 1 with a CI excluding 0)")
