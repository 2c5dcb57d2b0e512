# Paged FP8 MQA logits (spec 5): the SIMT path for any Vulkan 1.3 device;
# geometry, formats and cache forms are specialization constants.
qattn_shader(NAME paged_mqa_logits_simt SOURCE paged_mqa_logits_simt.comp)
