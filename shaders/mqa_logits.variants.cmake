# FP8 MQA logits (spec 3): the SIMT path in its direct and staged forms (any
# Vulkan 1.3 device) and the cooperative-matrix path. q/k formats, geometry
# and rows per subgroup are specialization constants (mqa_logits_common.glsl).
qattn_shader(NAME mqa_logits_direct SOURCE mqa_logits_simt.comp DEFINES MQA_STAGED=0)
qattn_shader(NAME mqa_logits_staged SOURCE mqa_logits_simt.comp DEFINES MQA_STAGED=1)
qattn_shader(NAME mqa_logits_coopmat SOURCE mqa_logits_coopmat.comp)
# The matrix ceiling of the coopmat path (backend_vulkan/vk_ceiling.c).
qattn_shader(NAME mqa_logits_ceiling SOURCE mqa_logits_ceiling.comp)
