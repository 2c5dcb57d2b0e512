// Bit-exact encoders for the KV store: correctly rounded f32 division and the
// fp8 (e4m3 fn/fnuz, e5m2) / int8 encoders of spec 1-2, all in integer arithmetic. The CPU
// reference divides with IEEE f32 division (correctly rounded); a GPU's
// OpFDiv may be off by ulps and its float ops may flush denormals, so none of
// this touches float arithmetic: bits in, bits out.
#ifndef QATTN_COMMON_ENCODE_GLSL
#define QATTN_COMMON_ENCODE_GLSL

// Index of the highest set bit of a non-zero 64-bit value.
int qa_msb64(uint64_t x) {
    uint hi = uint(x >> 32);
    return hi != 0u ? 32 + findMSB(hi) : findMSB(uint(x));
}

// value = q * 2^x (q >= 2^24), plus `sticky` (non-zero bits below q's last bit
// were lost), rounded to nearest even as f32 bits (sign not included).
// Handles f32 denormal results and overflow to infinity.
uint qa_round_to_f32(uint64_t q, int x, bool sticky) {
    int p = qa_msb64(q);
    int e = p + x; // unbiased exponent of the value
    if (e > 127) return 0x7F800000u;
    // Bits to drop so that the kept integer has 24 bits (normal) or its
    // last bit weighs 2^-149 (denormal).
    int drop = e >= -126 ? p - 23 : -149 - x;
    // drop > 0 always: callers pass q >= 2^39 (see qa_div_rn).
    if (drop > 63) return 0u; // below half of the smallest denormal
    uint64_t n = q >> uint(drop);
    uint64_t rem = q & ((1ul << uint(drop)) - 1ul);
    uint64_t hlf = 1ul << uint(drop - 1);
    if (rem > hlf || (rem == hlf && (sticky || (n & 1ul) != 0ul))) n += 1ul;
    if (e >= -126) {
        // n in [2^23, 2^24]; 2^24 carries into the exponent (and to inf).
        return (uint(e + 127) << 23) + uint(n - (1ul << 23));
    }
    return uint(n); // denormal, or 2^23 = the smallest normal
}

// Splits a finite non-zero |f32| (bits without sign) into m * 2^x with m an
// integer < 2^24.
void qa_split(uint mag, out uint m, out int x) {
    uint ex = mag >> 23;
    if (ex == 0u) { m = mag; x = -149; }
    else { m = (mag & 0x7FFFFFu) | 0x800000u; x = int(ex) - 150; }
}

// a / b correctly rounded to nearest even, for finite or infinite a and b > 0
// (finite non-zero or +inf). Returns f32 bits.
uint qa_div_rn(uint a, uint b) {
    uint sign = a & 0x80000000u;
    uint am = a & 0x7FFFFFFFu;
    if (am > 0x7F800000u) return 0x7FC00000u;              // NaN
    if (b == 0x7F800000u) return am == 0x7F800000u ? 0x7FC00000u : sign; // x/inf
    if (am == 0x7F800000u) return sign | 0x7F800000u;       // inf/x
    if (am == 0u) return sign;                              // +-0 / x
    uint ma, mb;
    int xa, xb;
    qa_split(am, ma, xa);
    qa_split(b, mb, xb);
    // Normalise both to 24-bit integers so the quotient has 40-41 bits.
    int sa = 23 - findMSB(ma), sb = 23 - findMSB(mb);
    ma <<= uint(sa); xa -= sa;
    mb <<= uint(sb); xb -= sb;
    uint64_t num = uint64_t(ma) << 40;
    uint64_t q = num / uint64_t(mb);
    bool sticky = num - q * uint64_t(mb) != 0ul;
    return sign | qa_round_to_f32(q, xa - xb - 40, sticky);
}

// f32 bits -> fp8 code (spec 1): RNE, satfinite (inf too), NaN -> 0x7F fn /
// 0x80 fnuz, -0 and negatives rounding to zero -> 0x80 fn / 0x00 fnuz.
uint qa_f32_to_fp8(uint y, bool fnuz) {
    uint mag = y & 0x7FFFFFFFu;
    bool neg = (y & 0x80000000u) != 0u;
    if (mag > 0x7F800000u) return fnuz ? 0x80u : 0x7Fu;
    uint max_bits = fnuz ? 0x43700000u : 0x43E00000u; // 240, 448
    uint max_code = fnuz ? 0x7Fu : 0x7Eu;
    uint c;
    if (mag >= max_bits) {
        c = max_code;
    } else if (mag < 0x00800000u) {
        c = 0u; // f32 denormals are far below half of fp8's smallest step
    } else {
        int emin = fnuz ? -7 : -6;            // exponent of the smallest normal
        int e = int(mag >> 23) - 127;
        int ec = max(e, emin);
        uint m = (mag & 0x7FFFFFu) | 0x800000u; // value = m * 2^(e-23)
        int k = 20 + (ec - e);                  // bits of m below the fp8 step 2^(ec-3)
        uint n;
        if (k >= 25) {
            n = 0u;
        } else {
            n = m >> uint(k);
            uint rem = m & ((1u << uint(k)) - 1u);
            uint hlf = 1u << uint(k - 1);
            if (rem > hlf || (rem == hlf && (n & 1u) != 0u)) n += 1u;
        }
        c = uint(ec - emin) * 8u + n;
        c = min(c, max_code);
    }
    if (c == 0u && fnuz) return 0u;
    return (neg ? 0x80u : 0u) | c;
}

// f32 bits -> fp8 e5m2 code (spec 1): RNE; finite overflow and infinity
// saturate to +-57344 (0x7B / 0xFB); NaN -> 0x7F; -0 and negatives rounding
// to zero -> 0x80. e5m2: 2 mantissa bits, smallest normal 2^-14, subnormal
// step 2^-16.
uint qa_f32_to_e5m2(uint y) {
    uint mag = y & 0x7FFFFFFFu;
    bool neg = (y & 0x80000000u) != 0u;
    if (mag > 0x7F800000u) return 0x7Fu;
    uint c;
    if (mag >= 0x47600000u) {        // >= 57344 (and inf)
        c = 0x7Bu;
    } else if (mag < 0x00800000u) {
        c = 0u;                      // f32 denormals: far below half of 2^-16
    } else {
        const int emin = -14;
        int e = int(mag >> 23) - 127;
        int ec = max(e, emin);
        uint m = (mag & 0x7FFFFFu) | 0x800000u; // value = m * 2^(e-23)
        int k = 21 + (ec - e);                  // bits of m below the step 2^(ec-2)
        uint n;
        if (k >= 25) {
            n = 0u;
        } else {
            n = m >> uint(k);
            uint rem = m & ((1u << uint(k)) - 1u);
            uint hlf = 1u << uint(k - 1);
            if (rem > hlf || (rem == hlf && (n & 1u) != 0u)) n += 1u;
        }
        c = min(uint(ec - emin) * 4u + n, 0x7Bu);
    }
    return (neg ? 0x80u : 0u) | c;
}

// f32 bits -> int8 (as a uint byte): round to nearest even, clamp to
// [-127, 127]. NaN gives 0.
uint qa_f32_to_i8(uint y) {
    uint mag = y & 0x7FFFFFFFu;
    bool neg = (y & 0x80000000u) != 0u;
    if (mag > 0x7F800000u) return 0u;
    int r;
    if (mag >= 0x43000000u) { // |y| >= 128 (and inf)
        r = 127;
    } else if (mag < 0x3F000000u) { // |y| < 0.5
        r = 0;
    } else {
        int e = int(mag >> 23) - 127; // -1 .. 6
        uint m = (mag & 0x7FFFFFu) | 0x800000u;
        int k = 23 - e;               // 17 .. 24
        uint n = m >> uint(k);
        uint rem = m & ((1u << uint(k)) - 1u);
        uint hlf = 1u << uint(k - 1);
        if (rem > hlf || (rem == hlf && (n & 1u) != 0u)) n += 1u;
        r = min(int(n), 127);
    }
    return uint(neg ? -r : r) & 0xFFu;
}

#endif
