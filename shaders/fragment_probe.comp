#version 450
// Which lane holds which element of a 16x16x16 f16 fragment: loads index
// matrices (element (r, c) holds r * 16 + c) as the A, B and accumulator
// operands and writes, per lane, each element it holds. The Vulkan backend
// (vk_fragment_probe.c) compares the result with the layout the
// register-resident decode kernel builds its fragments for.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_buffer_reference : require

layout(local_size_x = 32) in;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer F16s { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32s { float v[]; };
layout(push_constant, std430) uniform Push {
    uint64_t idx16; // 256 f16: r * 16 + c
    uint64_t idx32; // 256 f32: r * 16 + c
    uint64_t dst;   // 3 x 32 lanes x 8 elements f32, then the three lengths
} pc;

void main() {
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c;
    coopMatLoad(a, F16s(pc.idx16).v, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(b, F16s(pc.idx16).v, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(c, F32s(pc.idx32).v, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    const uint lane = gl_SubgroupInvocationID;
    F32s o = F32s(pc.dst);
    for (int i = 0; i < a.length() && i < 8; ++i) o.v[0 * 256 + lane * 8 + i] = float(a[i]);
    for (int i = 0; i < b.length() && i < 8; ++i) o.v[1 * 256 + lane * 8 + i] = float(b[i]);
    for (int i = 0; i < c.length() && i < 8; ++i) o.v[2 * 256 + lane * 8 + i] = c[i];
    if (lane == 0) {
        o.v[768] = float(a.length());
        o.v[769] = float(b.length());
        o.v[770] = float(c.length());
    }
}
