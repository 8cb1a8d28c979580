/* The protobuf wire format, as graph_override/frozen/graphdef/_scan.c reads and
 * writes it: varints, field keys and length-delimited payloads, each read
 * checked against the end of the data. Included by _scan.c after Python.h.
 */
#ifndef GRAPH_OVERRIDE_SCAN_WIRE_H
#define GRAPH_OVERRIDE_SCAN_WIRE_H

#include <stdint.h>
#include <stddef.h>

/* Reads a varint of at most `most` bytes at *p (< end); 0 if it runs
 * past end or is longer. */
static int read_varint_n(const uint8_t **p, const uint8_t *end, uint64_t *out, int most) {
    const uint8_t *q = *p;
    uint64_t v = 0;
    int shift;
    for (shift = 0; shift < 7 * most && q < end; shift += 7) {
        uint8_t b = *q++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* A varint value (up to 10 bytes). */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    return read_varint_n(p, end, out, 10);
}

/* Skips the value of a field of wire type `wt` (not LEN); 0 if it does
 * not fit, or for groups and invalid wire types. */
static int skip_value(const uint8_t **p, const uint8_t *end, int wt) {
    uint64_t v;
    switch (wt) {
    case 0:
        return read_varint(p, end, &v);
    case 1:
        if (end - *p < 8) return 0;
        *p += 8;
        return 1;
    case 5:
        if (end - *p < 4) return 0;
        *p += 4;
        return 1;
    default:
        return 0;
    }
}

/* Reads a field key and, for LEN fields, the payload bounds. */
static int read_field(const uint8_t **p, const uint8_t *end, uint64_t *field, int *wt,
                      const uint8_t **start, const uint8_t **stop) {
    uint64_t key, len;
    /* Keys and lengths are 32-bit (at most 5 bytes): protobuf refuses more. */
    if (!read_varint_n(p, end, &key, 5) || key > 0xFFFFFFFFu) return 0;
    *field = key >> 3;
    *wt = (int)(key & 7);
    if (*field == 0) return 0;
    if (*wt != 2) return skip_value(p, end, *wt);
    if (!read_varint_n(p, end, &len, 5) || len > (uint64_t)(end - *p)) return 0;
    *start = *p;
    *stop = *p + len;
    *p = *stop;
    return 1;
}

static size_t varint_size(uint64_t v) {
    size_t k = 1;
    while (v >= 0x80) {
        v >>= 7;
        k++;
    }
    return k;
}

static uint8_t *write_varint(uint8_t *out, uint64_t v) {
    while (v >= 0x80) {
        *out++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *out++ = (uint8_t)v;
    return out;
}

#endif
