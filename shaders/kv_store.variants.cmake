# KV store: one variant per cache dtype (each takes bf16 or f16 tokens).
qattn_shader(NAME kv_store_bf16 SOURCE kv_store.comp DEFINES KV_BF16=1)
qattn_shader(NAME kv_store_fp8fn SOURCE kv_store.comp DEFINES KV_FP8FN=1 QA_FNUZ=false)
qattn_shader(NAME kv_store_fp8fnuz SOURCE kv_store.comp DEFINES KV_FP8FNUZ=1 QA_FNUZ=true)
qattn_shader(NAME kv_store_fp8e5m2 SOURCE kv_store.comp DEFINES KV_FP8E5M2=1)
qattn_shader(NAME kv_store_i8 SOURCE kv_store.comp DEFINES KV_I8=1)
