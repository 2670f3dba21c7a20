/* SPDX-License-Identifier: MIT */
/* The C API from C (compiled as C99 with warnings as errors): versions,
   backends and devices, tensors on every device, safetensors files, a model
   file's forward pass against a reference computed here from its own
   weights, errors as statuses with messages, and the library's messages
   and files.
     usage: test_c_api MODEL.safetensors TMPDIR [DATA_DIR]
            test_c_api --messages drop|capture|reset   (with SWITCHYARD_PROFILE=1)
            test_c_api --no-disk-cache   (runs on vulkan:0; 77 when there is none) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/switchyard_c.h"

#if defined(__unix__)
#include <pthread.h>
#endif

static int failures = 0;

#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "FAIL %s:%d: (%s) ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                    \
      fputc('\n', stderr);                                             \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

/* A call that must succeed; on failure the test stops (later steps need it). */
#define OK(call)                                                                 \
  do {                                                                           \
    sy_status s_ = (call);                                                       \
    if (s_ != SY_OK) {                                                           \
      fprintf(stderr, "FAIL %s:%d: %s gave %s: %s\n", __FILE__, __LINE__, #call, \
              sy_status_name(s_), sy_last_error());                              \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* A condition later steps depend on: the test stops when it does not hold. */
#define REQUIRE(cond, ...)    \
  do {                        \
    CHECK(cond, __VA_ARGS__); \
    if (!(cond)) exit(1);     \
  } while (0)

/* A call that must fail with `status` and a message containing `part`. */
#define FAILS(call, status, part)                                                                \
  do {                                                                                           \
    sy_status s_ = (call);                                                                       \
    CHECK(s_ == (status), "%s gave %s, expected %s (%s)", #call, sy_status_name(s_),             \
          sy_status_name(status), sy_last_error());                                              \
    CHECK(strstr(sy_last_error(), (part)) != NULL, "%s: message '%s' does not name '%s'", #call, \
          sy_last_error(), (part));                                                              \
  } while (0)

static void test_library(void) {
  CHECK(strcmp(sy_version(), SWITCHYARD_VERSION) == 0, "library %s, headers %s", sy_version(),
        SWITCHYARD_VERSION);
  CHECK(sy_dtype_size(SY_F32) == 4 && sy_dtype_size(SY_U8) == 1 && sy_dtype_size(SY_I64) == 8,
        "dtype sizes");
  CHECK(sy_dtype_size((sy_dtype)9) == 0 && sy_dtype_name((sy_dtype)9) == NULL, "a bad dtype");
  CHECK(strcmp(sy_dtype_name(SY_I32), "i32") == 0, "dtype name %s", sy_dtype_name(SY_I32));
  CHECK(strcmp(sy_dtype_name(SY_BF16), "bf16") == 0 && sy_dtype_size(SY_F16) == 2,
        "16-bit dtypes: %s", sy_dtype_name(SY_BF16));
  CHECK(strcmp(sy_status_name(SY_ERROR_OUT_OF_MEMORY), "SY_ERROR_OUT_OF_MEMORY") == 0, "status");
  CHECK(strcmp(sy_status_name(SY_ERROR_DEVICE_LOST), "SY_ERROR_DEVICE_LOST") == 0, "status");
}

static void test_devices(void) {
  size_t nb = 0, nd = 0, i, j;
  int have_cpu = 0;
  sy_device *d = NULL, *again = NULL, *cpu = NULL;
  OK(sy_backend_count(&nb));
  CHECK(nb >= 1, "no backends");
  for (i = 0; i < nb; ++i) {
    const char *name = NULL, *reason = NULL;
    int available = -1;
    OK(sy_backend_info(i, &name, &available, &reason));
    printf("backend %s: %s%s\n", name, available ? "available" : "unavailable: ", reason);
    CHECK(available == 0 || available == 1, "available %d", available);
    CHECK(available || strlen(reason) > 0, "backend %s unavailable without a reason", name);
    if (strcmp(name, "cpu") == 0) have_cpu = available;
  }
  CHECK(have_cpu, "the cpu backend is not listed as available");
  FAILS(sy_backend_info(nb, NULL, NULL, NULL), SY_ERROR_INVALID_ARGUMENT, "index");

  OK(sy_device_count(&nd));
  CHECK(nd >= 1, "no devices");
  for (i = 0; i < nd; ++i) {
    OK(sy_device_get(i, &d));
    OK(sy_device_by_name(sy_device_name(d), &again));
    CHECK(again == d, "by name %s gives another handle", sy_device_name(d));
    printf("device %s (%s, %s, %llu MiB, %zu properties)\n", sy_device_name(d),
           sy_device_description(d), sy_device_type_name(sy_device_kind(d)),
           (unsigned long long)(sy_device_memory_bytes(d) >> 20), sy_device_property_count(d));
    CHECK(strncmp(sy_device_name(d), sy_device_backend(d), strlen(sy_device_backend(d))) == 0,
          "device %s of backend %s", sy_device_name(d), sy_device_backend(d));
    if (strcmp(sy_device_name(d), "cpu") != 0) { /* "vulkan:1" is index 1 */
      const char* colon = strchr(sy_device_name(d), ':');
      CHECK(colon && atoi(colon + 1) == sy_device_index(d), "device %s has index %d",
            sy_device_name(d), sy_device_index(d));
    }
    for (j = 0; j < sy_device_property_count(d); ++j) {
      const char *k = NULL, *v = NULL;
      OK(sy_device_property(d, j, &k, &v));
      CHECK(k && *k && v, "property %zu of %s", j, sy_device_name(d));
    }
    FAILS(sy_device_property(d, sy_device_property_count(d), NULL, NULL), SY_ERROR_INVALID_ARGUMENT,
          "index");
    OK(sy_device_synchronize(d));
  }
  OK(sy_device_by_name("cpu", &cpu));
  CHECK(sy_device_kind(cpu) == SY_DEVICE_CPU && strcmp(sy_device_name(cpu), "cpu") == 0, "cpu");
  OK(sy_device_default(&d));
  CHECK(d != NULL, "no default device");
  FAILS(sy_device_by_name("tpu:3", &d), SY_ERROR, "tpu");
  FAILS(sy_device_get(nd, &d), SY_ERROR_INVALID_ARGUMENT, "index");
  FAILS(sy_device_by_name(NULL, &d), SY_ERROR_INVALID_ARGUMENT, "NULL");
  FAILS(sy_device_count(NULL), SY_ERROR_INVALID_ARGUMENT, "NULL");
  CHECK(sy_device_name(NULL) == NULL && sy_device_memory_bytes(NULL) == 0, "NULL device facts");
}

/* A round trip of `n` elements of `dtype` through device `d`, and back via the cpu. */
static void round_trip(sy_device* d, sy_dtype dtype, const int64_t* shape, size_t ndim,
                       const void* data, size_t n) {
  sy_tensor *t = NULL, *c = NULL;
  sy_device* cpu = NULL;
  size_t bytes = n * sy_dtype_size(dtype), got_ndim = 99, i;
  int64_t dims[4] = {0, 0, 0, 0};
  unsigned char* back = malloc(bytes + 1);
  OK(sy_device_by_name("cpu", &cpu));
  OK(sy_tensor_create(d, dtype, shape, ndim, data, &t));
  CHECK(sy_tensor_device(t) == d, "tensor on %s", sy_device_name(sy_tensor_device(t)));
  CHECK(sy_tensor_dtype(t) == dtype && sy_tensor_numel(t) == (int64_t)n &&
            sy_tensor_nbytes(t) == bytes,
        "facts of a %s tensor on %s", sy_dtype_name(dtype), sy_device_name(d));
  OK(sy_tensor_shape(t, &got_ndim, dims, 4));
  CHECK(got_ndim == ndim, "ndim %zu, expected %zu", got_ndim, ndim);
  for (i = 0; i < ndim; ++i) CHECK(dims[i] == shape[i], "dim %zu: %lld", i, (long long)dims[i]);
  OK(sy_tensor_read(t, back, bytes));
  CHECK(memcmp(back, data, bytes) == 0, "%s values changed on %s", sy_dtype_name(dtype),
        sy_device_name(d));
  OK(sy_tensor_to(t, cpu, &c));
  CHECK(sy_tensor_device(c) == cpu, "to(cpu)");
  memset(back, 0, bytes);
  OK(sy_tensor_read(c, back, bytes));
  CHECK(memcmp(back, data, bytes) == 0, "%s values changed moving %s to cpu", sy_dtype_name(dtype),
        sy_device_name(d));
  FAILS(sy_tensor_read(t, back, bytes + 1), SY_ERROR_INVALID_ARGUMENT, "bytes");
  sy_tensor_destroy(c);
  sy_tensor_destroy(t);
  free(back);
}

static void test_tensors(sy_device* d) {
  float f[15];
  int32_t i32[6] = {-7, 0, 1, 2147483647, -2147483647 - 1, 42};
  uint8_t u8[5] = {0, 1, 127, 128, 255};
  int64_t i64[3] = {(int64_t)1 << 40, -3, 9};
  uint16_t halves[4] = {0x3f80, 0xc040, 0x7f80, 0x0001}; /* bf16 1, -3, inf; f16 2^-24 last */
  int64_t s35[2] = {3, 5}, s23[2] = {2, 3}, s5[1] = {5}, s3[1] = {3}, s04[2] = {0, 4};
  /* 2^55 bytes: beyond any address space, whatever the overcommit policy. */
  int64_t bad[2] = {2, -1}, huge[2] = {(int64_t)1 << 26, (int64_t)1 << 27};
  float zeros[6], scalar = 2.5f;
  sy_tensor* t = NULL;
  size_t i, nd = 9;
  for (i = 0; i < 15; ++i) f[i] = (float)i * 0.5f - 3.0f;
  round_trip(d, SY_F32, s35, 2, f, 15);
  round_trip(d, SY_I32, s23, 2, i32, 6);
  round_trip(d, SY_U8, s5, 1, u8, 5);
  round_trip(d, SY_I64, s3, 1, i64, 3);
  round_trip(d, SY_BF16, s3, 1, halves, 3);
  round_trip(d, SY_F16, s3, 1, halves + 1, 3);
  round_trip(d, SY_F32, NULL, 0, &scalar, 1); /* a scalar */

  OK(sy_tensor_create(d, SY_F32, s23, 2, NULL, &t)); /* zeros */
  OK(sy_tensor_read(t, zeros, sizeof zeros));
  for (i = 0; i < 6; ++i) CHECK(zeros[i] == 0.0f, "zeros[%zu] = %g", i, (double)zeros[i]);
  sy_tensor_destroy(t);
  OK(sy_tensor_create(d, SY_F32, s04, 2, NULL, &t)); /* no elements */
  OK(sy_tensor_read(t, NULL, 0));
  OK(sy_tensor_shape(t, &nd, NULL, 0));
  CHECK(nd == 2 && sy_tensor_numel(t) == 0, "empty tensor");
  FAILS(sy_tensor_shape(t, &nd, s3, 1), SY_ERROR_INVALID_ARGUMENT, "room for 2");
  sy_tensor_destroy(t);

  t = NULL;
  FAILS(sy_tensor_create(d, SY_F32, bad, 2, NULL, &t), SY_ERROR_INVALID_ARGUMENT, "(2,-1)");
  FAILS(sy_tensor_create(d, (sy_dtype)7, s23, 2, NULL, &t), SY_ERROR_INVALID_ARGUMENT, "dtype");
  FAILS(sy_tensor_create(d, SY_F32, NULL, 2, NULL, &t), SY_ERROR_INVALID_ARGUMENT, "shape");
  FAILS(sy_tensor_create(NULL, SY_F32, s23, 2, NULL, &t), SY_ERROR_INVALID_ARGUMENT, "device");
  FAILS(sy_tensor_create(d, SY_F32, huge, 2, NULL, &t), SY_ERROR_OUT_OF_MEMORY, "memory");
  CHECK(t == NULL, "a failed create wrote its output");
  FAILS(sy_tensor_read(NULL, zeros, sizeof zeros), SY_ERROR_INVALID_ARGUMENT, "NULL");
  sy_tensor_destroy(NULL);
}

static void test_safetensors(const char* tmp) {
  char path[1024], bad[1024];
  float a[6] = {1, 2, 3, 4, 5, 6.5f}, a_back[6];
  int64_t b[4] = {-1, 0, (int64_t)1 << 50, 7}, b_back[4];
  int64_t s23[2] = {2, 3}, s4[1] = {4};
  sy_device *cpu = NULL, *d = NULL;
  sy_tensor *ta = NULL, *tb = NULL, *t = NULL;
  sy_tensor_list *l = NULL, *in = NULL;
  size_t nd = 0, i;
  FILE* f;
  snprintf(path, sizeof path, "%s/c_api.safetensors", tmp);
  snprintf(bad, sizeof bad, "%s/c_api_bad.safetensors", tmp);
  OK(sy_device_by_name("cpu", &cpu));
  OK(sy_tensor_create(cpu, SY_F32, s23, 2, a, &ta));
  OK(sy_tensor_create(cpu, SY_I64, s4, 1, b, &tb));
  OK(sy_tensor_list_create(&l));
  OK(sy_tensor_list_add(l, "a", ta));
  OK(sy_tensor_list_add(l, "b", tb));
  FAILS(sy_tensor_list_add(l, "a", tb), SY_ERROR_INVALID_ARGUMENT, "'a'");
  FAILS(sy_tensor_list_add(l, "", tb), SY_ERROR_INVALID_ARGUMENT, "non-empty");
  OK(sy_tensor_list_set_metadata(l, "source", "test_c_api"));
  OK(sy_safetensors_save(path, l));
  sy_tensor_destroy(ta);
  sy_tensor_destroy(tb);

  OK(sy_device_count(&nd));
  for (i = 0; i < nd; ++i) {
    OK(sy_device_get(i, &d));
    OK(sy_safetensors_load(path, d, &in));
    CHECK(sy_tensor_list_size(in) == 2, "%zu tensors read", sy_tensor_list_size(in));
    CHECK(strcmp(sy_tensor_list_name(in, 0), "a") == 0 &&
              strcmp(sy_tensor_list_name(in, 1), "b") == 0,
          "names");
    CHECK(sy_tensor_list_metadata(in, "source") &&
              strcmp(sy_tensor_list_metadata(in, "source"), "test_c_api") == 0,
          "metadata");
    CHECK(sy_tensor_list_metadata(in, "absent") == NULL, "absent metadata");
    OK(sy_tensor_list_find(in, "b", &t));
    CHECK(sy_tensor_device(t) == d && sy_tensor_dtype(t) == SY_I64, "b on %s", sy_device_name(d));
    OK(sy_tensor_read(t, b_back, sizeof b_back));
    CHECK(memcmp(b, b_back, sizeof b) == 0, "b's values from %s", sy_device_name(d));
    sy_tensor_destroy(t);
    OK(sy_tensor_list_get(in, 0, &t));
    OK(sy_tensor_read(t, a_back, sizeof a_back));
    CHECK(memcmp(a, a_back, sizeof a) == 0, "a's values from %s", sy_device_name(d));
    sy_tensor_destroy(t);
    FAILS(sy_tensor_list_find(in, "zz", &t), SY_ERROR, "'zz'");
    FAILS(sy_tensor_list_get(in, 2, &t), SY_ERROR_INVALID_ARGUMENT, "index");
    sy_tensor_list_destroy(in);
  }
  sy_tensor_list_destroy(l);

  f = fopen(bad, "wb");
  CHECK(f != NULL, "cannot write %s", bad);
  if (f) {
    fwrite("\x40\x00\x00\x00\x00\x00\x00\x00{\"a\":", 1, 13, f); /* header cut short */
    fclose(f);
    FAILS(sy_safetensors_load(bad, cpu, &in), SY_ERROR, bad);
  }
  FAILS(sy_safetensors_load("/nonexistent/x.safetensors", cpu, &in), SY_ERROR,
        "/nonexistent/x.safetensors");

  /* A NumPy .npy array of float32 (2, 3), written here, read as samples. */
  snprintf(path, sizeof path, "%s/c_api.npy", tmp);
  f = fopen(path, "wb");
  REQUIRE(f != NULL, "cannot write %s", path);
  {
    char header[128]; /* a multiple of 64 bytes, as NumPy writes it */
    int64_t dims[2] = {0, 0};
    uint16_t len = (uint16_t)(sizeof header - 10);
    memset(header, ' ', sizeof header);
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    header[8] = (char)(len & 0xff); /* little-endian header length */
    header[9] = (char)(len >> 8);
    memcpy(header + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 60);
    header[sizeof header - 1] = '\n';
    fwrite(header, 1, sizeof header, f);
    fwrite(a, sizeof(float), 6, f); /* the host is little-endian, as '<f4' says */
    fclose(f);
    OK(sy_read_samples(path, &t));
    OK(sy_tensor_shape(t, &nd, dims, 2));
    CHECK(nd == 2 && dims[0] == 2 && dims[1] == 3, ".npy shape (%lld,%lld)", (long long)dims[0],
          (long long)dims[1]);
    OK(sy_tensor_read(t, a_back, sizeof a_back));
    CHECK(memcmp(a, a_back, sizeof a) == 0, ".npy values");
    sy_tensor_destroy(t);
  }
}

/* x (n, in) -> the MLP the file holds, computed here from its own weights:
   pairs of weight (out, in) and bias (out), ReLU between them. */
static float* reference_mlp(sy_tensor_list* state, const float* x, int64_t n,
                            int64_t* out_features) {
  size_t layers = sy_tensor_list_size(state) / 2, l;
  int64_t in = 784, i, o, k;
  float* cur = malloc(sizeof(float) * (size_t)(n * in));
  memcpy(cur, x, sizeof(float) * (size_t)(n * in));
  REQUIRE(sy_tensor_list_size(state) % 2 == 0, "an MLP's state has weight and bias pairs");
  for (l = 0; l < layers; ++l) {
    sy_tensor *w = NULL, *b = NULL;
    int64_t dims[2] = {0, 0};
    size_t nd = 0;
    float *wv, *bv, *next;
    OK(sy_tensor_list_get(state, 2 * l, &w));
    OK(sy_tensor_list_get(state, 2 * l + 1, &b));
    OK(sy_tensor_shape(w, &nd, dims, 2));
    REQUIRE(nd == 2 && dims[1] == in, "layer %zu: weight (%lld,%lld) after %lld features", l,
            (long long)dims[0], (long long)dims[1], (long long)in);
    REQUIRE(sy_tensor_numel(b) == dims[0] && sy_tensor_dtype(w) == SY_F32 &&
                sy_tensor_dtype(b) == SY_F32,
            "layer %zu: bias of %lld", l, (long long)sy_tensor_numel(b));
    wv = malloc(sy_tensor_nbytes(w));
    bv = malloc(sy_tensor_nbytes(b));
    OK(sy_tensor_read(w, wv, sy_tensor_nbytes(w)));
    OK(sy_tensor_read(b, bv, sy_tensor_nbytes(b)));
    next = malloc(sizeof(float) * (size_t)(n * dims[0]));
    for (i = 0; i < n; ++i)
      for (o = 0; o < dims[0]; ++o) {
        double acc = bv[o];
        for (k = 0; k < in; ++k) acc += (double)cur[i * in + k] * wv[o * in + k];
        next[i * dims[0] + o] = (l + 1 < layers && acc < 0) ? 0.0f : (float)acc;
      }
    free(cur);
    cur = next;
    in = dims[0];
    free(wv);
    free(bv);
    sy_tensor_destroy(w);
    sy_tensor_destroy(b);
  }
  *out_features = in;
  return cur;
}

static float* forward(sy_model* m, const float* x, int64_t n, int64_t* classes) {
  int64_t shape[2] = {0, 784}, dims[2] = {0, 0};
  size_t nd = 0;
  sy_tensor *in = NULL, *out = NULL;
  float* y;
  shape[0] = n;
  OK(sy_tensor_create(sy_model_device(m), SY_F32, shape, 2, x, &in));
  OK(sy_model_forward(m, in, &out));
  OK(sy_tensor_shape(out, &nd, dims, 2));
  REQUIRE(nd == 2 && dims[0] == n && dims[1] == 10, "output (%lld,%lld)", (long long)dims[0],
          (long long)dims[1]);
  CHECK(sy_tensor_device(out) == sy_model_device(m), "output on the model's device");
  *classes = dims[1];
  y = malloc(sy_tensor_nbytes(out));
  OK(sy_tensor_read(out, y, sy_tensor_nbytes(out)));
  sy_tensor_destroy(in);
  sy_tensor_destroy(out);
  return y;
}

static double max_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  size_t i;
  for (i = 0; i < n; ++i) {
    double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
    if (!(e <= m)) m = e; /* NaN counts */
  }
  return m;
}

static void test_model(const char* path, const char* tmp, const char* data_dir) {
  enum { N = 16 };
  static float x[N * 784];
  char copy[1024], file[1024];
  unsigned seed = 12345;
  int64_t classes = 0, ref_classes = 0, c2 = 0;
  size_t i, nd = 0;
  sy_device *cpu = NULL, *d = NULL;
  sy_model *m = NULL, *m2 = NULL, *on = NULL;
  sy_tensor_list* state = NULL;
  sy_tensor* wrong = NULL;
  float *ref, *y, *y2;
  int64_t shape[2] = {N, 784};
  for (i = 0; i < N * 784; ++i) { /* a fixed pseudo-random input in about [-1, 2.5] */
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) / 16777216.0f * 3.5f - 1.0f;
  }
  OK(sy_device_by_name("cpu", &cpu));
  OK(sy_model_load(path, cpu, &m));
  CHECK(sy_model_device(m) == cpu, "model on cpu");
  OK(sy_model_state(m, &state));
  ref = reference_mlp(state, x, N, &ref_classes);
  sy_tensor_list_destroy(state);
  y = forward(m, x, N, &classes);
  CHECK(classes == ref_classes && classes == 10, "%lld classes", (long long)classes);
  CHECK(max_diff(y, ref, N * 10) < 1e-4, "cpu forward differs from the reference by %g",
        max_diff(y, ref, N * 10));

  /* Saved and loaded again: the same numbers. */
  snprintf(copy, sizeof copy, "%s/c_api_model.safetensors", tmp);
  OK(sy_model_save(m, copy));
  OK(sy_model_load(copy, cpu, &m2));
  y2 = forward(m2, x, N, &c2);
  CHECK(memcmp(y, y2, sizeof(float) * N * 10) == 0, "a saved model computes other values");
  free(y2);
  sy_model_destroy(m2);

  /* On every device, loaded there and moved there. */
  OK(sy_device_count(&nd));
  for (i = 0; i < nd; ++i) {
    OK(sy_device_get(i, &d));
    OK(sy_model_load(path, d, &on));
    CHECK(sy_model_device(on) == d, "model on %s", sy_device_name(d));
    y2 = forward(on, x, N, &c2);
    CHECK(max_diff(y2, ref, N * 10) < 1e-3, "%s forward differs from the reference by %g",
          sy_device_name(d), max_diff(y2, ref, N * 10));
    printf("forward on %s: largest difference from the C reference %.2g\n", sy_device_name(d),
           max_diff(y2, ref, N * 10));
    free(y2);
    if (d != cpu) { /* an input elsewhere is refused, naming both devices */
      sy_tensor* out = NULL;
      OK(sy_tensor_create(cpu, SY_F32, shape, 2, x, &wrong));
      FAILS(sy_model_forward(on, wrong, &out), SY_ERROR_INVALID_ARGUMENT, sy_device_name(d));
      CHECK(out == NULL, "a failed forward wrote its output");
      sy_tensor_destroy(wrong);
    }
    sy_model_destroy(on);
    OK(sy_model_to(m, d));
    CHECK(sy_model_device(m) == d, "moved to %s", sy_device_name(d));
    y2 = forward(m, x, N, &c2);
    CHECK(max_diff(y2, ref, N * 10) < 1e-3, "moved to %s: differs by %g", sy_device_name(d),
          max_diff(y2, ref, N * 10));
    free(y2);
  }
  free(y);
  free(ref);

  /* Not a model file; not a file. */
  snprintf(file, sizeof file, "%s/c_api.safetensors", tmp);
  FAILS(sy_model_load(file, cpu, &on), SY_ERROR, "switchyard.model");
  FAILS(sy_model_load("/nonexistent/m.safetensors", cpu, &on), SY_ERROR, "/nonexistent");

  /* The test set: labels and images, and this model's accuracy on them. */
  if (data_dir) {
    char images[1024], labels[1024];
    sy_tensor *xs = NULL, *ys = NULL, *batch = NULL, *out = NULL;
    int64_t dims[2] = {0, 0}, n, correct = 0, k;
    uint8_t* truth;
    float *pixels, *logits;
    snprintf(images, sizeof images, "%s/t10k-images-idx3-ubyte.gz", data_dir);
    snprintf(labels, sizeof labels, "%s/t10k-labels-idx1-ubyte.gz", data_dir);
    OK(sy_read_samples(images, &xs));
    OK(sy_read_idx(labels, &ys));
    OK(sy_tensor_shape(xs, &nd, dims, 2));
    REQUIRE(nd == 2 && dims[0] == 10000 && dims[1] == 784, "images (%lld,%lld)", (long long)dims[0],
            (long long)dims[1]);
    REQUIRE(sy_tensor_dtype(ys) == SY_U8 && sy_tensor_numel(ys) == 10000, "labels");
    n = 1000;
    pixels = malloc(sy_tensor_nbytes(xs));
    truth = malloc(sy_tensor_nbytes(ys));
    OK(sy_tensor_read(xs, pixels, sy_tensor_nbytes(xs)));
    OK(sy_tensor_read(ys, truth, sy_tensor_nbytes(ys)));
    OK(sy_model_to(m, cpu));
    dims[0] = n;
    OK(sy_tensor_create(cpu, SY_F32, dims, 2, pixels, &batch));
    OK(sy_model_forward(m, batch, &out));
    logits = malloc(sy_tensor_nbytes(out));
    OK(sy_tensor_read(out, logits, sy_tensor_nbytes(out)));
    for (k = 0; k < n; ++k) {
      int64_t c, best = 0;
      CHECK(truth[k] < 10, "label %d", truth[k]);
      for (c = 1; c < 10; ++c)
        if (logits[k * 10 + c] > logits[k * 10 + best]) best = c;
      correct += best == truth[k];
    }
    printf("accuracy on the first %lld test images: %.3f\n", (long long)n,
           (double)correct / (double)n);
    CHECK(correct > n / 2, "accuracy %lld of %lld: the model or its input is wrong",
          (long long)correct, (long long)n);
    FAILS(sy_read_idx(file, &ys), SY_ERROR, file);
    free(pixels);
    free(truth);
    free(logits);
    sy_tensor_destroy(xs);
    sy_tensor_destroy(ys);
    sy_tensor_destroy(batch);
    sy_tensor_destroy(out);
  }
  sy_model_destroy(m);
}

#if defined(__unix__)
/* The last error is per thread: another thread's failure leaves this one's. */
static void* fail_elsewhere(void* arg) {
  sy_device* d = NULL;
  (void)arg;
  sy_device_by_name("elsewhere:9", &d);
  return strstr(sy_last_error(), "elsewhere") ? (void*)1 : NULL;
}
static void test_threads(void) {
  pthread_t th;
  void* r = NULL;
  sy_device* d = NULL;
  sy_device_by_name("here:9", &d);
  CHECK(pthread_create(&th, NULL, fail_elsewhere, NULL) == 0, "pthread_create");
  pthread_join(th, &r);
  CHECK(r == (void*)1, "the other thread's last error");
  CHECK(strstr(sy_last_error(), "here:9") != NULL, "this thread's last error became '%s'",
        sy_last_error());
}
#endif

static void print_message(const char* message, void* user) {
  const char* nl = strchr(message, '\n');
  printf("[%s] %.*s\n", (const char*)user, nl ? (int)(nl - message) : (int)strlen(message),
         message);
}

/* Some device work for the profiler to report at exit. */
static void some_work(sy_device* d) {
  int64_t shape[1] = {1000};
  sy_tensor* t = NULL;
  OK(sy_tensor_create(d, SY_F32, shape, 1, NULL, &t));
  OK(sy_device_synchronize(d));
  sy_tensor_destroy(t);
}

int main(int argc, char** argv) {
  size_t nd = 0, i;
  sy_device* d = NULL;
  if (argc == 3 && strcmp(argv[1], "--messages") == 0) {
    if (strcmp(argv[2], "drop") == 0) {
      sy_set_message_handler(NULL, NULL);
    } else {
      sy_set_message_handler(print_message, "app handler");
      if (strcmp(argv[2], "reset") == 0) sy_reset_message_handler(); /* stderr again */
    }
    OK(sy_device_default(&d));
    some_work(d);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--no-disk-cache") == 0) {
    const char* require = getenv("SWITCHYARD_REQUIRE_VULKAN");
    sy_set_disk_cache(0);
    if (sy_device_by_name("vulkan:0", &d) != SY_OK) {
      printf("no Vulkan device: %s\n", sy_last_error());
      return require && strcmp(require, "1") == 0 ? 1 : 77; /* 77: skipped */
    }
    some_work(d);
    return 0;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.safetensors TMPDIR [DATA_DIR]\n", argv[0]);
    return 2;
  }
  test_library();
  test_devices();
  OK(sy_device_count(&nd));
  for (i = 0; i < nd; ++i) {
    OK(sy_device_get(i, &d));
    test_tensors(d);
  }
  test_safetensors(argv[2]);
  test_model(argv[1], argv[2], argc > 3 ? argv[3] : NULL);
#if defined(__unix__)
  test_threads();
#endif
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("all C API checks passed on %zu devices\n", nd);
  return 0;
}
