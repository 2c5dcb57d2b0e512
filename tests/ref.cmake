# CPU reference tests: number formats (spec 1) and each op through the public
# API on the cpu backend against independent f64 loops and hand-worked cases.
qattn_add_test(test_convert SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_convert.c LIBS m LABELS ref)
qattn_add_test(test_ref_decode SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_decode.c LIBS m LABELS ref)
qattn_add_test(test_ref_kv_store SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_kv_store.c LIBS m LABELS ref)
qattn_add_test(test_ref_mqa_logits SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_mqa_logits.c LIBS m LABELS ref)
qattn_add_test(test_ref_paged_mqa_logits SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_paged_mqa_logits.c LIBS m LABELS ref)
