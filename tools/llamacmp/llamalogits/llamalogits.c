// llamalogits: llama.cpp as a logits oracle for tools/llamacmp. It evaluates a fixed list of
// token ids -- the first P in one batch (llama.cpp's prefill path), the rest one per
// llama_decode call (its decode path) -- and prints the logits of every position as JSON:
// {"n_vocab":V,"logits":[[...],...]}. It links against a llama.cpp build, which is not part of
// kernelrt; build it by hand (see tools/llamacmp/README.md), never in make test.
//
// usage: llamalogits MODEL.gguf THREADS KV(f32|f16|q8_0) P ID,ID,...
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int parse_ids(const char *s, llama_token **out) {
    int n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    llama_token *ids = malloc(sizeof *ids * n);
    int k = 0;
    char *end;
    while (*s) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        ids[k++] = (llama_token)v;
        s = *end == ',' ? end + 1 : end;
    }
    *out = ids;
    return k;
}

static void print_row(const float *row, int nv, int last) {
    putchar('[');
    for (int j = 0; j < nv; j++) printf(j ? ",%.9g" : "%.9g", row[j]);
    fputs(last ? "]" : "],", stdout);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s MODEL.gguf THREADS KV(f32|f16|q8_0) P ID,ID,...\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[2]), p = atoi(argv[4]);
    enum ggml_type kv = GGML_TYPE_F16;
    if (!strcmp(argv[3], "f32")) kv = GGML_TYPE_F32;
    else if (!strcmp(argv[3], "q8_0")) kv = GGML_TYPE_Q8_0;
    llama_token *ids;
    int n = parse_ids(argv[5], &ids);
    if (p < 1 || p > n) {
        fprintf(stderr, "P = %d: want 1..%d (the number of ids)\n", p, n);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n + 16;
    cp.n_batch = cp.n_ubatch = p;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = cp.type_v = kv;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fprintf(stderr, "cannot create a context\n"), 1;
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));

    printf("{\"n_vocab\":%d,\"logits\":[", nv);
    struct llama_batch b = llama_batch_init(p, 0, 1);
    for (int i = 0; i < n;) {
        int m = i == 0 ? p : 1;
        b.n_tokens = m;
        for (int t = 0; t < m; t++) {
            b.token[t] = ids[i + t];
            b.pos[t] = i + t;
            b.n_seq_id[t] = 1;
            b.seq_id[t][0] = 0;
            b.logits[t] = 1;
        }
        if (llama_decode(ctx, b) != 0) return fprintf(stderr, "llama_decode failed at %d\n", i), 1;
        for (int t = 0; t < m; t++) print_row(llama_get_logits_ith(ctx, t), nv, i + t == n - 1);
        i += m;
    }
    puts("]}");
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
