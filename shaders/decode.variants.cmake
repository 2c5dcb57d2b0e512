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
  # Precompiled specializations of the packed reader's hot geometries
  # (lanes per key, query heads per workgroup, keys per tile and group):
  # the planner's choice on 32-lane devices for GQA 4 and 8, and on 8-lane ones
  # (lavapipe, which so runs this code path in CI).
  foreach(cfg "16;4;2" "16;8;2" "8;2;2")
    list(GET cfg 0 l)
    list(GET cfg 1 q)
    list(GET cfg 2 u)
    qattn_shader(NAME decode_packed_${dt}_l${l}q${q}u${u} SOURCE decode.comp
                 DEFINES KV_${DT}=1 PACKED=1 FIX_LPK=${l} FIX_QH=${q} FIX_U=${u})
  endforeach()
endforeach()
qattn_shader(NAME decode_merge SOURCE merge.comp)
# Matrix-unit stage 1 (f16 operands; a bf16 cache has no coopmat variant).
foreach(dt fp8fn fp8fnuz i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_coopmat_${dt} SOURCE decode_coopmat.comp DEFINES KV_${DT}=1)
endforeach()
# Bandwidth-oriented stage 1 (all rows of a kv head per workgroup, q in
# shared memory, scores/softmax/PV in phases): shaders/decode_stream.comp.
foreach(dt bf16 fp8fn fp8fnuz i8)
  string(TOUPPER ${dt} DT)
  qattn_shader(NAME decode_stream_${dt} SOURCE decode_stream.comp DEFINES KV_${DT}=1)
endforeach()
