/*
 * A kernel built to break the qualification rules: a register budget of 24
 * VGPRs (amdgpu_num_vgpr) against 64 values that stay live across a loop,
 * so the compiler must spill them to scratch. The qualification test runs
 * the checker on it and passes only if the checker rejects it (a test of
 * the checker, not a shipped kernel).
 */
extern "C" __attribute__((global)) __attribute__((amdgpu_num_vgpr(24))) void
qattn_probe_spills(const float *in, float *out, int rounds) {
    const unsigned t = __builtin_amdgcn_workitem_id_x();
    float v[64];
    for (int i = 0; i < 64; ++i) v[i] = in[t * 64 + i];
    float acc = 0.0f;
    for (int r = 0; r < rounds; ++r)
        for (int i = 0; i < 64; ++i) acc = acc * v[i] + v[(i + r) & 63];
    for (int i = 0; i < 64; ++i) out[t * 64 + i] = v[i] * acc;
}
