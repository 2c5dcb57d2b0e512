# Streaming read behind qattn_read_stream (the read-bandwidth ceiling
# qattn-bench reports against): one variant; the workgroup size is a
# specialization constant.
qattn_shader(NAME read_bandwidth SOURCE read_bandwidth.comp)
