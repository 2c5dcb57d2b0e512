// Shared by every qattn shader: extensions, buffer-reference types (kernels
// reach tensors by 64-bit device address passed in push constants, see
// backend_vulkan/vk_internal.h) and exact number-format decoders (spec 1).
#ifndef QATTN_COMMON_GLSL
#define QATTN_COMMON_GLSL

#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

// One element type per reference; `align` is what the compiler may assume
// about every address built from it.
layout(buffer_reference, std430, buffer_reference_align = 1) buffer RefU8 { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer RefI8 { int8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RefU16 { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RefU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RefI32 { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RefF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer RefU32x2 { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer RefU32x4 { uvec4 v[]; };

// Element index -> byte address. Indices are int32 (the core validates that
// every tensor spans fewer than 2^31 elements); products go to 64 bits.
uint64_t qa_at(uint64_t base, int64_t elem, uint esize) { return base + uint64_t(elem) * uint64_t(esize); }

float qa_bf16_to_f32(uint bits) { return uintBitsToFloat(bits << 16); }

// f32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN.
uint qa_f32_to_bf16(float x) {
    uint u = floatBitsToUint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x0040u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// Exact fp8 decode (spec 1) without relying on denormal support: normal
// codes become f32 bit patterns with the exponent re-biased, subnormal codes
// an exact integer times a power of two. fnuz: bias 8 instead of 7.
float qa_fp8_to_f32(uint c, bool fnuz) {
    uint mag = c & 0x7Fu;
    if (fnuz ? (c == 0x80u) : (mag == 0x7Fu)) return uintBitsToFloat(0x7FC00000u);
    float v = mag >= 8u ? uintBitsToFloat((mag << 20) + ((fnuz ? 119u : 120u) << 23))
                        : float(mag) * (fnuz ? 0.0009765625 : 0.001953125);
    return (c & 0x80u) != 0u ? -v : v;
}

#endif
