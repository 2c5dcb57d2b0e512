# Decode attention shaders: stage 1 per cache dtype and reader, plus merge.
# Names: decode_<reader>_<dtype>; geometry comes from specialization
# constants (see shaders/decode.comp and core/src/plan_decode.c).
foreach(dt bf16 fp8fn fp8fnuz i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_scalar_${dt} SOURCE decode.comp DEFINES KV_${DT}=1)
endforeach()
foreach(dt fp8fn fp8fnuz)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_packed_${dt} SOURCE decode.comp DEFINES KV_${DT}=1 PACKED=1)
endforeach()
qattn_shader(NAME decode_merge SOURCE merge.comp)
# Matrix-unit stage 1 (f16 operands; a bf16 cache has no coopmat variant).
foreach(dt fp8fn fp8fnuz i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_coopmat_${dt} SOURCE decode_coopmat.comp DEFINES KV_${DT}=1)
endforeach()
