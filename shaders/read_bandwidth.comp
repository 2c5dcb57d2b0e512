#version 450
// Streaming read (qattn_read_stream): reads a range of 16-byte words once and
// adds the wrapping sum of its 32-bit words to one u32. It exists to be timed:
// what it reaches is the read bandwidth a kernel on this device can get
// through Vulkan, the ceiling decode is measured against.
//
// What makes it fast is memory-level parallelism, not arithmetic: each lane
// issues LOADS independent 16-byte loads before it consumes any of them, a
// workgroup step covers WG * LOADS consecutive words (each load instruction
// of a subgroup touches one contiguous span), and the host launches several
// workgroups per compute unit, each striding over the range. The sum is
// reduced in shared memory so each workgroup issues a single atomic.
//
// Spec constants: 0 = workgroup size (a power of two, <= 1024).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define LOADS 4u

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(push_constant, std430) uniform Push {
    uint64_t src;  // first byte of the range (16-byte aligned)
    uint64_t sum;  // the u32 the sum is added to
    uint words;    // 16-byte words in the range (< 2^31, checked by the core)
} pc;

shared uint red[WG];

void main() {
    const uint tid = gl_LocalInvocationID.x, groups = gl_NumWorkGroups.x;
    const uint step = WG * LOADS;
    const uint full = pc.words / step;
    RefU32x4 src = RefU32x4(pc.src);
    uvec4 acc = uvec4(0u);
    for (uint c = gl_WorkGroupID.x; c < full; c += groups) {
        const uint base = c * step + tid;
        uvec4 v[LOADS];
        [[unroll]] for (uint k = 0u; k < LOADS; ++k) v[k] = src.v[base + k * WG];
        [[unroll]] for (uint k = 0u; k < LOADS; ++k) acc += v[k];
    }
    // The words after the last full step, spread over every lane of the grid.
    for (uint i = full * step + gl_WorkGroupID.x * WG + tid; i < pc.words; i += groups * WG)
        acc += src.v[i];

    red[tid] = acc.x + acc.y + acc.z + acc.w;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1u) {
        if (tid < h) red[tid] += red[tid + h];
        barrier();
    }
    if (tid == 0u) atomicAdd(RefU32(pc.sum).v[0], red[0]);
}
