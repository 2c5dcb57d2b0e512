# Decode attention shaders: the tiled stage 1 per cache dtype, on the matrix
# unit (f16 operands: fp8 and int8 caches) and on the vector units (every
# dtype, any Vulkan 1.3 device), plus the split merge. Names:
# decode_<simt|matrix>_<dtype>; geometry comes from specialization constants
# (shaders/decode_tiled.comp, core/src/plan_decode.c).
# QATTN_DECODE_ABLATE is for measurement builds only (scripts/decode-ablate-build.sh):
# a mask of stages the tiled shader leaves out, so its results are wrong.
set(QATTN_DECODE_ABLATE 0 CACHE STRING "measurement builds only: decode stages left out (a mask, see shaders/decode_tiled.comp)")
if(NOT QATTN_DECODE_ABLATE MATCHES "^[0-9]+$")
  message(FATAL_ERROR "QATTN_DECODE_ABLATE must be a decimal mask")
endif()
foreach(dt bf16 fp8fn fp8fnuz i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_simt_${dt} SOURCE decode_tiled.comp DEFINES KV_${DT}=1 MATRIX=0 QA_ABLATE=${QATTN_DECODE_ABLATE})
endforeach()
foreach(dt fp8fn fp8fnuz i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_matrix_${dt} SOURCE decode_tiled.comp DEFINES KV_${DT}=1 MATRIX=1 QA_ABLATE=${QATTN_DECODE_ABLATE})
endforeach()
qattn_shader(NAME decode_merge SOURCE decode_merge.comp)
