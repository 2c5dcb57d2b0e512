# FP8 MQA logits (spec 3): the SIMT path in its direct and staged forms (any
# Vulkan 1.3 device) and the cooperative-matrix path, one variant per head
# dim (its per-lane fragment arrays need constant sizes). q/k formats,
# geometry and rows per workgroup are specialization constants
# (mqa_logits_common.glsl).
qattn_shader(NAME mqa_logits_direct SOURCE mqa_logits_simt.comp DEFINES MQA_STAGED=0)
qattn_shader(NAME mqa_logits_staged SOURCE mqa_logits_simt.comp DEFINES MQA_STAGED=1)
qattn_shader(NAME mqa_logits_coopmat_d64 SOURCE mqa_logits_coopmat.comp DEFINES HEAD_DIM=64)
qattn_shader(NAME mqa_logits_coopmat_d128 SOURCE mqa_logits_coopmat.comp DEFINES HEAD_DIM=128)
qattn_shader(NAME mqa_logits_coopmat_d256 SOURCE mqa_logits_coopmat.comp DEFINES HEAD_DIM=256)
# The matrix ceiling of the coopmat path (backend_vulkan/vk_ceiling.c).
qattn_shader(NAME mqa_logits_ceiling SOURCE mqa_logits_ceiling.comp)
