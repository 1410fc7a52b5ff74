/* malloc_count: an LD_PRELOAD library that counts the heap allocations of a process
 * (bench/python_overhead.py: bytes allocated per run). It forwards to glibc's own
 * entry points (__libc_malloc, ...), so it needs no dlsym, and adds two counters:
 *   void partita_malloc_count(unsigned long long* calls, unsigned long long* bytes);
 * returns how many allocations (malloc, calloc, realloc, memalign, aligned_alloc,
 * posix_memalign, valloc) were made so far and the bytes they asked for.
 * Not for production: it only counts, and is built on request (target
 * partita_malloc_count, not part of the default build). */
#include <errno.h>
#include <stddef.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void* __libc_valloc(size_t);

static unsigned long long g_calls, g_bytes;

static void count(size_t n) {
  __atomic_fetch_add(&g_calls, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&g_bytes, (unsigned long long)n, __ATOMIC_RELAXED);
}

void partita_malloc_count(unsigned long long* calls, unsigned long long* bytes) {
  *calls = __atomic_load_n(&g_calls, __ATOMIC_RELAXED);
  *bytes = __atomic_load_n(&g_bytes, __ATOMIC_RELAXED);
}

void* malloc(size_t n) {
  count(n);
  return __libc_malloc(n);
}
void* calloc(size_t k, size_t n) {
  count(k * n);
  return __libc_calloc(k, n);
}
void* realloc(void* p, size_t n) {
  count(n);
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  count(n);
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  count(n);
  return __libc_memalign(a, n);
}
void* valloc(size_t n) {
  count(n);
  return __libc_valloc(n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  count(n);
  void* p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
