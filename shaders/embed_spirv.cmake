# cmake -DNAME=<name> -DSPV=<file.spv> -DOUT=<file.c> -P embed_spirv.cmake
# Writes the SPIR-V words of SPV as `const qattn_spirv_blob qattn_spirv_<NAME>`
# (name, words, count; see the generated qattn_shaders.h). SPIR-V is a little-endian stream of 32-bit words.
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR rem "${n} % 8")
if(NOT rem EQUAL 0 OR n EQUAL 0)
  message(FATAL_ERROR "embed_spirv: ${SPV} is not a whole number of 32-bit words")
endif()
math(EXPR words "${n} / 8")
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," body "${hex}")
string(REGEX REPLACE "(([^,]*,){8})" "\\1\n    " body "${body}")
file(WRITE ${OUT} "/* Generated from ${NAME}.spv by shaders/embed_spirv.cmake. */
#include \"qattn_shaders.h\"
static const uint32_t words[] = {
    ${body}
};
const qattn_spirv_blob qattn_spirv_${NAME} = {\"${NAME}\", words, ${words}u};
")
