# Paged FP8 MQA logits (spec 5): the SIMT path for any Vulkan 1.3 device;
# geometry, formats and cache forms are specialization constants.
qattn_shader(NAME paged_mqa_logits_simt SOURCE paged_mqa_logits_simt.comp)
# The matrix variant (cooperative matrices, f16 16x16x16 or 16x8x16): one
# per head dim (the fragments' arrays are sized by it) and per fragment
# path (LAYOUT 1: the probed element layout, in registers; 0: through
# shared memory). paged_mqa_logits_matrix_d<D>_<reg|shared>.
foreach(d 64 128 256)
  qattn_shader(NAME paged_mqa_logits_matrix_d${d}_reg SOURCE paged_mqa_logits_matrix.comp
               DEFINES HEAD_DIM=${d} LAYOUT=1)
  qattn_shader(NAME paged_mqa_logits_matrix_d${d}_shared SOURCE paged_mqa_logits_matrix.comp
               DEFINES HEAD_DIM=${d} LAYOUT=0)
endforeach()
