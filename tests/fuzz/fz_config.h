/* What the config and family fuzz targets check of a config.json (fz_config.c): the runtime's
 * reading of it and the model and split layers' use of it on a real model directory. */
#ifndef TQ_FZ_CONFIG_H
#define TQ_FZ_CONFIG_H

/* rt_config_load on DIR (its config.json is the input): a config it accepts must describe a
 * model the decoder can run (head sizes, rope table, top-k, per-layer kinds agreeing with
 * formats/family.c); one it refuses must say why. Aborts on a broken promise. */
void fz_config_runtime(const char *dir);
/* tq_model_open and tq_split_plan on DIR: they may refuse, never crash. */
void fz_config_model(const char *dir);

#endif
