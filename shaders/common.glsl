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

// f16 bits -> f32 bits, exactly and in integer arithmetic (a float
// conversion may flush f16 subnormals). NaN keeps its sign and becomes the
// quiet NaN 0x7FC00000 (the CPU reference's qattn_f16_to_f32).
uint qa_f16_bits_to_f32_bits(uint h) {
    const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return sign | (m != 0u ? 0x7FC00000u : 0x7F800000u);
    if (e != 0u) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0u) return sign;
    const int p = findMSB(m); // subnormal m * 2^-24: exponent p - 24
    return sign | (uint(p + 103) << 23) | ((m << uint(23 - p)) & 0x7FFFFFu);
}

float qa_f16_to_f32(uint h) { return uintBitsToFloat(qa_f16_bits_to_f32_bits(h)); }

// f32 -> f16 bits, round to nearest even in integer arithmetic (the
// reference's qattn_f32_to_f16): past 65504 the rounding carries into
// infinity; NaN stays a quiet NaN with its sign and top payload bits.
uint qa_f32_to_f16(float x) {
    const uint u = floatBitsToUint(x);
    const uint sign = (u >> 16) & 0x8000u, mag = u & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) return sign | 0x7E00u | ((u >> 13) & 0x3FFu);
    if (mag >= 0x47800000u) return sign | 0x7C00u; // >= 65536 (and inf)
    const int e = int(mag >> 23) - 127;
    if (e < -25) return sign; // below half of the smallest subnormal (2^-25)
    // value = m * 2^(e - 23); the f16 quantum at this binade is
    // 2^(max(e, -14) - 10), so k = 13 + max(-14 - e, 0) bits go.
    const uint m = (mag & 0x7FFFFFu) | 0x800000u;
    const int k = 13 + max(-14 - e, 0);
    uint n = m >> uint(k);
    const uint rem = m & ((1u << uint(k)) - 1u), hlf = 1u << uint(k - 1);
    if (rem > hlf || (rem == hlf && (n & 1u) != 0u)) n += 1u;
    // normal: (e + 14) << 10 plus n (n carries 1024 = the implicit bit);
    // subnormal: n alone (a carry to 1024 is the smallest normal).
    return sign | (e >= -14 ? (uint(e + 14) << 10) + n : n);
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
