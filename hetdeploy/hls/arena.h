// hetdeploy: the byte-addressed memories of an FPGA subfunction (the on-chip arena, and DDR).
//
// Every buffer of the memory plan is a run of elements at a byte offset; an element is stored as the
// raw bits of its fixed-point type in ceil(width / 8) little-endian bytes, so a buffer of N values at
// ap_fixed<16,I> takes 2N bytes whatever its producer and consumer are.
#ifndef HETDEPLOY_ARENA_H_
#define HETDEPLOY_ARENA_H_

#include "ap_fixed.h"
#include "ap_int.h"

namespace hetdeploy {

typedef unsigned char byte_t;

template <class T> struct stored {
    static const int bytes = (T::width + 7) / 8;
};

// an element of an m_axi array of T: the next power of two of whole bytes (DDR weights)
template <class T> struct word {
    static const int bytes = stored<T>::bytes <= 1 ? 1 : stored<T>::bytes <= 2 ? 2 : stored<T>::bytes <= 4 ? 4 : 8;
};

template <class T, int BYTES> T read_bytes(const byte_t *base, int index) {
#pragma HLS INLINE
    ap_uint<BYTES * 8> bits = 0;
    for (int b = 0; b < BYTES; b++) {
#pragma HLS UNROLL
        bits.range(8 * b + 7, 8 * b) = base[index * BYTES + b];
    }
    T value;
    value.range(T::width - 1, 0) = bits.range(T::width - 1, 0);
    return value;
}

template <class T> T read(const byte_t *base, int index) {
#pragma HLS INLINE
    return read_bytes<T, stored<T>::bytes>(base, index);
}

#ifndef __SYNTHESIS__
// C-simulation of a typed m_axi port into the DDR region: the array it reads at ``image``
template <class T> void load_words(const byte_t *image, T *target, int n) {
    for (int i = 0; i < n; i++) {
        target[i] = read_bytes<T, word<T>::bytes>(image, i);
    }
}
#endif

template <class T> void write(byte_t *base, int index, T value) {
#pragma HLS INLINE
    ap_uint<stored<T>::bytes * 8> bits = 0;
    bits.range(T::width - 1, 0) = value.range(T::width - 1, 0);
    for (int b = 0; b < stored<T>::bytes; b++) {
#pragma HLS UNROLL
        base[index * stored<T>::bytes + b] = bits.range(8 * b + 7, 8 * b);
    }
}

// float ports of the top <-> fixed-point buffers (T's rounding and saturation apply)
template <class T> void from_float(const float *source, byte_t *buffer, int n) {
    for (int i = 0; i < n; i++) {
#pragma HLS PIPELINE
        write<T>(buffer, i, T(source[i]));
    }
}

template <class T> void to_float(const byte_t *buffer, float *target, int n) {
    for (int i = 0; i < n; i++) {
#pragma HLS PIPELINE
        target[i] = read<T>(buffer, i).to_float();
    }
}

// ONNX Flatten of a channels-last buffer: pixel-major (H, W, C) values to ONNX's (C, H, W) order
template <class T> void flatten_channels_last(const byte_t *source, byte_t *target, int pixels, int channels) {
    for (int c = 0; c < channels; c++) {
        for (int p = 0; p < pixels; p++) {
#pragma HLS PIPELINE
            write<T>(target, c * pixels + p, read<T>(source, p * channels + c));
        }
    }
}

// Any other relayout (Reshape, Transpose, Squeeze, Unsqueeze, DepthToSpace, SpaceToDepth): target value j
// is source value index[j], the table hetdeploy computed from the op (units/<unit>/index.h)
template <class T> void gather(const byte_t *source, byte_t *target, const int *index, int n) {
    for (int j = 0; j < n; j++) {
#pragma HLS PIPELINE
        write<T>(target, j, read<T>(source, index[j]));
    }
}

} // namespace hetdeploy

#endif
