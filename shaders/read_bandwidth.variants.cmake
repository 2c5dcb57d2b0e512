# Streaming read behind qattn_read_stream (the read-bandwidth ceiling
# qattn-bench reports against): one variant; the workgroup size is a
# specialization constant.
qattn_shader(NAME read_bandwidth SOURCE read_bandwidth.comp)
# Decode's own access pattern behind qattn_decode_read: one variant for every
# cache dtype (rows are read as 16-byte chunks whatever their element).
qattn_shader(NAME decode_read SOURCE decode_read.comp)
