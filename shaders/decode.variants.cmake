# Decode attention shaders: the tiled stage 1 per cache dtype, on the matrix
# unit (f16 operands: fp8 and int8 caches) and on the vector units (every
# dtype, any Vulkan 1.3 device), plus the split merge. Names:
# decode_<simt|matrix>_<dtype>; geometry comes from specialization constants
# (shaders/decode_tiled.comp, core/src/plan_decode.c).
foreach(dt bf16 fp8fn fp8fnuz fp8e5m2 i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_simt_${dt} SOURCE decode_tiled.comp DEFINES KV_${DT}=1 MATRIX=0)
endforeach()
foreach(dt fp8fn fp8fnuz fp8e5m2 i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_matrix_${dt} SOURCE decode_tiled.comp DEFINES KV_${DT}=1 MATRIX=1)
endforeach()
qattn_shader(NAME decode_merge SOURCE decode_merge.comp)
# The register-resident stage 1 (fp8 and int8 caches) and the probe of the
# fragment layout it builds its operands in.
foreach(dt fp8fn fp8fnuz fp8e5m2 i8)
  string(TOUPPER ${dt} DT)
  foreach(d 64 128)
    qattn_shader(NAME decode_regs_${dt}_d${d} SOURCE decode_regs.comp DEFINES KV_${DT}=1 HEAD_DIM=${d})
  endforeach()
endforeach()
qattn_shader(NAME fragment_probe SOURCE fragment_probe.comp)
