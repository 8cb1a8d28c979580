/* Node names for graph_override/frozen/graphdef/_scan.c: TensorFlow's rules for
 * names and op types, a hash table from names to node indices (batched
 * lookups with prefetch: they are memory bound), and the resolution of
 * inputs (NAME, NAME:PORT, ^NAME) to the node they read. Included by
 * _scan.c after Python.h.
 *
 * A file's names cannot make the table slow: the hash is seeded once per
 * process from os.urandom (hash_seed, set at import), and a lookup that
 * probes more than PROBE_LIMIT slots gives up (PROBES_EXCEEDED), which
 * makes scan() return None: the caller then takes the pure-Python path.
 */
#ifndef GRAPH_OVERRIDE_SCAN_NAMES_H
#define GRAPH_OVERRIDE_SCAN_NAMES_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))  /* MSVC and others: a plain lookup */
#endif

static uint64_t mix(uint64_t h) {  /* MurmurHash3's finalizer */
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_seed;  /* per process: set by the module's init */

static uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = mix(hash_seed ^ 0x9E3779B97F4A7C15ULL ^ (uint64_t)n);
    uint64_t w;
    while (n >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x87C37B91114253D5ULL;
        h = (h << 31) | (h >> 33);
        s += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, s, n);
    return mix(h ^ w);
}

/* Open addressing over node names, one 16-byte entry per slot: a probe
 * reads one entry and, on a tag match, the name's bytes. Offsets and
 * lengths fit 32 bits: scan() refuses data of 2 GB or more. */
#define EMPTY 0xFFFFFFFFu
#define BATCH 32
/* At most half the slots are used: a lookup in a random table probes 2.5
 * slots on average, and more than 128 about never (a graph of 10 million
 * nodes has its longest run near 60). */
#define PROBE_LIMIT 128
#define PROBES_EXCEEDED INT64_MIN

typedef struct {
    uint32_t tag, node, off, len;
} entry;

typedef struct {
    entry *e;
    size_t mask;
} table;

typedef struct {  /* a name to look up */
    const uint8_t *s;
    uint32_t len;
    uint64_t h;
} key;

static int table_init(table *t, Py_ssize_t count) {
    size_t cap = 16;
    while (cap < (size_t)count * 2) cap <<= 1;
    t->e = (entry *)PyMem_Malloc(cap * sizeof(entry));
    if (t->e == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(t->e, 0xFF, cap * sizeof(entry));
    t->mask = cap - 1;
    return 0;
}

static void table_free(table *t) { PyMem_Free(t->e); }

static void key_set(key *k, const table *t, const uint8_t *s, size_t n) {
    k->s = s;
    k->len = (uint32_t)n;
    k->h = hash_bytes(s, n);
    PREFETCH(&t->e[k->h & t->mask]);
}

/* The node named k, or -1 - (the free slot where it would go), or
 * PROBES_EXCEEDED after PROBE_LIMIT slots. */
static int64_t table_probe(const table *t, const uint8_t *data, const key *k) {
    size_t i = (size_t)k->h & t->mask;
    uint32_t tag = (uint32_t)(k->h >> 32);
    for (int probes = 0;; probes++) {
        const entry *e = &t->e[i];
        if (probes == PROBE_LIMIT) return PROBES_EXCEEDED;
        if (e->node == EMPTY) return -1 - (int64_t)i;
        if (e->tag == tag && e->len == k->len && memcmp(data + e->off, k->s, k->len) == 0)
            return e->node;
        i = (i + 1) & t->mask;
    }
}

/* Prefetches the bytes of the name in k's first slot, if its tag matches. */
static void key_prefetch_name(const key *k, const table *t, const uint8_t *data) {
    const entry *e = &t->e[k->h & t->mask];
    if (e->node != EMPTY && e->tag == (uint32_t)(k->h >> 32)) PREFETCH(data + e->off);
}

/* Adds every name, in node order, in batches whose table entries are
 * fetched from memory together. Returns the first node whose name an
 * earlier node has, or -1; -2 when a lookup probed too long. */
static int64_t table_fill(table *t, const uint8_t *data, const int32_t *names, Py_ssize_t n) {
    key keys[BATCH];
    for (Py_ssize_t base = 0; base < n; base += BATCH) {
        Py_ssize_t nb = n - base < BATCH ? n - base : BATCH, k;
        for (k = 0; k < nb; k++)
            key_set(&keys[k], t, data + names[2 * (base + k)], (size_t)names[2 * (base + k) + 1]);
        for (k = 0; k < nb; k++) key_prefetch_name(&keys[k], t, data);
        for (k = 0; k < nb; k++) {
            int64_t r = table_probe(t, data, &keys[k]);
            if (r == PROBES_EXCEEDED) return -2;
            if (r >= 0) return base + k;
            entry *e = &t->e[-1 - r];
            e->tag = (uint32_t)(keys[k].h >> 32);
            e->node = (uint32_t)(base + k);
            e->off = (uint32_t)(keys[k].s - data);
            e->len = keys[k].len;
        }
    }
    return -1;
}

static int name_char(uint8_t c, int first) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.')
        return 1;
    return !first && (c == '_' || c == '-' || c == '/' || c == '>');
}

static int op_char(uint8_t c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
           || c == '_' || c == '.' || c == '>' || c == '-';
}

static int well_formed(const uint8_t *s, int64_t n, int op) {
    int64_t i;
    if (n == 0) return 0;
    for (i = 0; i < n; i++)
        if (op ? !op_char(s[i]) : !name_char(s[i], i == 0)) return 0;
    return 1;
}

/* Splits an input into the name it reads and its output index (-1: a
 * control input); 0 if it is not NAME, NAME:DIGITS (up to 9) or ^NAME. */
static int split_input(const uint8_t *s, size_t n, size_t *name_len, int64_t *port) {
    size_t colon = n;
    int64_t value = 0;
    if (n > 0 && s[0] == '^') {
        *port = -1;
        *name_len = n - 1;
        return 1;
    }
    while (colon > 0 && s[colon - 1] != ':') colon--;
    *port = 0;
    *name_len = n;
    if (colon == 0) return 1;
    if (n - colon == 0 || n - colon > 9) return 0;  /* s[colon - 1] is the last ':' */
    for (size_t i = colon; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        value = value * 10 + (s[i] - '0');
    }
    *port = value;
    *name_len = colon - 1;
    return 1;
}

/* src and port of every input (see the module), in batches; 0, or -1
 * when a lookup probed too long. */
static int resolve_inputs(const table *t, const uint8_t *data, const int32_t *inputs,
                           Py_ssize_t m, int32_t *src, int32_t *port) {
    key keys[BATCH];
    int ok[BATCH];
    for (Py_ssize_t base = 0; base < m; base += BATCH) {
        Py_ssize_t nb = m - base < BATCH ? m - base : BATCH, k;
        for (k = 0; k < nb; k++) {
            const uint8_t *s = data + inputs[2 * (base + k)];
            size_t len;
            int64_t p;
            ok[k] = split_input(s, (size_t)inputs[2 * (base + k) + 1], &len, &p);
            port[base + k] = (int32_t)p;
            if (ok[k]) key_set(&keys[k], t, p < 0 ? s + 1 : s, len);
        }
        for (k = 0; k < nb; k++)
            if (ok[k]) key_prefetch_name(&keys[k], t, data);
        for (k = 0; k < nb; k++) {
            int64_t r = ok[k] ? table_probe(t, data, &keys[k]) : -1;
            if (r == PROBES_EXCEEDED) return -1;
            src[base + k] = r >= 0 ? (int32_t)r : -1;
        }
    }
    return 0;
}

#endif
