"""The input layouts a job can give its kernel (config ``input_layout``): name -> the torch
memory format's attribute name (``torch.channels_last``).  Names only, no torch: the
config's checks read them before anything imports torch."""
INPUT_LAYOUTS = {"channels_last": "channels_last", "nchw": "contiguous_format"}
