/* SPDX-License-Identifier: MIT */
/* classify (C): the embed example through the C API. Loads a model file
   (switchyard train --save model.safetensors), classifies the Fashion-MNIST
   test set on the best device, and times one image at a time on every
   device. Built against an installed Switchyard with pkg-config:
     cc -std=c99 -Wall -Werror classify.c -o classify $(pkg-config --cflags --libs switchyard)
     usage: classify MODEL.safetensors [DATA_DIR] [LATENCY_IMAGES] */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <switchyard/switchyard_c.h>
#include <time.h>

#define PIXELS 784
#define CLASSES 10

/* Reports a failed call with the library's message and leaves. */
static void check(sy_status s, const char* what) {
  if (s != SY_OK) {
    fprintf(stderr, "classify: %s: %s (%s)\n", what, sy_last_error(), sy_status_name(s));
    exit(1);
  }
}

/* The classes of `n` images (normalized pixels) on the model's device. */
static void predict(sy_model* m, const float* pixels, int64_t n, int* classes) {
  int64_t shape[2] = {0, PIXELS}, i, c;
  sy_tensor *x = NULL, *y = NULL;
  float* logits = malloc(sizeof(float) * (size_t)(n * CLASSES));
  shape[0] = n;
  check(sy_tensor_create(sy_model_device(m), SY_F32, shape, 2, pixels, &x), "upload");
  check(sy_model_forward(m, x, &y), "forward");
  check(sy_tensor_read(y, logits, sizeof(float) * (size_t)(n * CLASSES)), "read back");
  for (i = 0; i < n; ++i) {
    int best = 0;
    for (c = 1; c < CLASSES; ++c)
      if (logits[i * CLASSES + c] > logits[i * CLASSES + best]) best = (int)c;
    classes[i] = best;
  }
  sy_tensor_destroy(x);
  sy_tensor_destroy(y);
  free(logits);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const char* dir = argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist";
  int images = argc > 3 ? atoi(argv[3]) : 200;
  char path[4096];
  sy_device *best = NULL, *d = NULL;
  sy_model* model = NULL;
  sy_tensor *xs = NULL, *ys = NULL;
  float* pixels;
  unsigned char* labels;
  int* classes;
  int64_t n, i, correct = 0;
  size_t nd = 0, k;
  double* ms;
  if (argc < 2 || images < 1) {
    fprintf(stderr, "usage: %s MODEL.safetensors [DATA_DIR] [LATENCY_IMAGES]\n", argv[0]);
    return 2;
  }
  printf("Switchyard %s (headers %s), C API\n", sy_version(), SWITCHYARD_VERSION);

  snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
  check(sy_read_samples(path, &xs), "test images");
  snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
  check(sy_read_idx(path, &ys), "test labels");
  n = sy_tensor_numel(ys);
  if (n < 1 || sy_tensor_numel(xs) != n * PIXELS) {
    fprintf(stderr, "classify: expected %lld images of %d pixels\n", (long long)n, PIXELS);
    return 1;
  }
  pixels = malloc(sy_tensor_nbytes(xs));
  labels = malloc(sy_tensor_nbytes(ys));
  classes = malloc(sizeof(int) * (size_t)n);
  check(sy_tensor_read(xs, pixels, sy_tensor_nbytes(xs)), "images");
  check(sy_tensor_read(ys, labels, sy_tensor_nbytes(ys)), "labels");

  /* Accuracy on the best device, in batches of 1000. */
  check(sy_device_default(&best), "the best device");
  check(sy_model_load(argv[1], best, &model), "the model");
  for (i = 0; i < n; i += 1000)
    predict(model, pixels + i * PIXELS, n - i < 1000 ? n - i : 1000, classes + i);
  for (i = 0; i < n; ++i) correct += classes[i] == labels[i];
  printf("test accuracy on %s: %.4f (%lld images)\n", sy_device_name(best),
         (double)correct / (double)n, (long long)n);

  /* One image at a time on every device: upload, forward, read back. */
  ms = malloc(sizeof(double) * (size_t)images);
  check(sy_device_count(&nd), "devices");
  for (k = 0; k < nd; ++k) {
    int j;
    check(sy_device_get(k, &d), "a device");
    check(sy_model_to(model, d), "moving the model");
    for (j = -5; j < images; ++j) { /* the first 5 warm up */
      double t0 = now_ms();
      int c;
      predict(model, pixels + ((j + 5) % n) * PIXELS, 1, &c);
      if (j >= 0) ms[j] = now_ms() - t0;
    }
    qsort(ms, (size_t)images, sizeof(double), by_value);
    printf("latency on %s: %.3f ms per image (median of %d)\n", sy_device_name(d), ms[images / 2],
           images);
  }
  free(ms);
  free(pixels);
  free(labels);
  free(classes);
  sy_tensor_destroy(xs);
  sy_tensor_destroy(ys);
  sy_model_destroy(model);
  return 0;
}
