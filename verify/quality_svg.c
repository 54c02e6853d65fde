/* verify/quality_svg.c — tq-verify quality --plot: the per-layer relative MSE as a
 * hand-written SVG line chart (one series for all differing tensors, one per class), bytes
 * fixed by the report alone. */
#include "verify/verify_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 760
#define H 440
#define LEFT 80
#define RIGHT 200 /* legend column */
#define TOP 40
#define BOTTOM 56
#define TICKS 5

/* Colours of the class series, in class order (the total is black). */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define N_PALETTE (sizeof palette / sizeof *palette)

static void xml_text(tq_sb *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': tq_sb_str(b, "&amp;"); break;
        case '<': tq_sb_str(b, "&lt;"); break;
        case '>': tq_sb_str(b, "&gt;"); break;
        case '"': tq_sb_str(b, "&quot;"); break;
        default:
            if ((unsigned char)*s >= 0x20)
                tq_sb_put(b, s, 1);
        }
    }
}

/* The smallest 1, 2 or 5 times a power of ten at or above v (v > 0). */
static double nice_ceil(double v)
{
    double p = pow(10, floor(log10(v)));
    for (int i = 0; i < 3; i++) {
        double m = (double[]){1, 2, 5}[i] * p;
        if (m >= v * (1 - 1e-12))
            return m;
    }
    return 10 * p;
}

static double px(const tq_quality_report *r, uint64_t l)
{
    double w = W - LEFT - RIGHT;
    return r->n_layers <= 1 ? LEFT + w / 2 : LEFT + w * (double)l / (double)(r->n_layers - 1);
}

static double py(double v, double ymax)
{
    return TOP + (H - TOP - BOTTOM) * (1 - v / ymax);
}

/* Class c has a value in some layer (lm_head, the embeddings have none: not plotted). */
static int plotted(const tq_quality_report *r, size_t c)
{
    for (uint64_t l = 0; l < r->n_layers; l++)
        if (isfinite(r->layer_class_rel_mse[l * r->n_classes + c]))
            return 1;
    return 0;
}

/* One series: a polyline through its points and a circle per point (class c, or the total
 * when c < 0). */
static void series(tq_sb *b, const tq_quality_report *r, long c, double ymax)
{
    const char *name = c < 0 ? "all" : r->classes[c];
    const char *col = c < 0 ? "#000000" : palette[(size_t)c % N_PALETTE];
    tq_sb_printf(b, "<g class=\"series\" data-class=\"");
    xml_text(b, name);
    tq_sb_printf(b, "\" stroke=\"%s\" fill=\"%s\">\n<polyline fill=\"none\" stroke-width=\"%d\" points=\"", col, col,
                 c < 0 ? 2 : 1);
    int first = 1;
    for (uint64_t l = 0; l < r->n_layers; l++) {
        double v = c < 0 ? r->layer_rel_mse[l] : r->layer_class_rel_mse[l * r->n_classes + (size_t)c];
        if (!isfinite(v))
            continue;
        tq_sb_printf(b, "%s%.2f,%.2f", first ? "" : " ", px(r, l), py(v, ymax));
        first = 0;
    }
    tq_sb_str(b, "\"/>\n");
    for (uint64_t l = 0; l < r->n_layers; l++) {
        double v = c < 0 ? r->layer_rel_mse[l] : r->layer_class_rel_mse[l * r->n_classes + (size_t)c];
        if (!isfinite(v))
            continue;
        tq_sb_printf(b, "<circle class=\"%s\" data-layer=\"%llu\" cx=\"%.2f\" cy=\"%.2f\" r=\"%d\"><title>layer %llu ",
                     c < 0 ? "point-all" : "point", (unsigned long long)l, px(r, l), py(v, ymax), c < 0 ? 4 : 2,
                     (unsigned long long)l);
        xml_text(b, name);
        tq_sb_printf(b, ": %.6g</title></circle>\n", v);
    }
    tq_sb_str(b, "</g>\n");
}

char *tq_quality_svg(const tq_quality_report *r, size_t *len, tq_err *e)
{
    tq_sb b = {0};
    double vmax = 0;
    for (uint64_t l = 0; l < r->n_layers; l++) {
        vmax = fmax(vmax, r->layer_rel_mse[l]);
        for (size_t c = 0; c < r->n_classes; c++)
            if (isfinite(r->layer_class_rel_mse[l * r->n_classes + c]))
                vmax = fmax(vmax, r->layer_class_rel_mse[l * r->n_classes + c]);
    }
    double ymax = vmax > 0 ? nice_ceil(vmax) : 1;
    int plot_r = W - RIGHT, plot_b = H - BOTTOM;
    tq_sb_printf(&b,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n"
                 "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n<text x=\"%d\" y=\"22\" font-size=\"14\">",
                 W, H, W, H, W, H, LEFT);
    tq_sb_str(&b, "Relative MSE per layer: ");
    xml_text(&b, r->test ? r->test : "TEST");
    tq_sb_str(&b, " against ");
    xml_text(&b, r->ref ? r->ref : "REF");
    tq_sb_str(&b, "</text>\n");
    /* axes, grid and ticks */
    tq_sb_printf(&b, "<g stroke=\"#cccccc\" stroke-width=\"1\">\n");
    for (int k = 0; k <= TICKS; k++) {
        double y = py(ymax * k / TICKS, ymax);
        tq_sb_printf(&b, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\"/>\n", LEFT, y, plot_r, y);
    }
    tq_sb_str(&b, "</g>\n<g text-anchor=\"end\">\n");
    for (int k = 0; k <= TICKS; k++)
        tq_sb_printf(&b, "<text x=\"%d\" y=\"%.2f\">%.3g</text>\n", LEFT - 6, py(ymax * k / TICKS, ymax) + 4,
                     ymax * k / TICKS);
    tq_sb_str(&b, "</g>\n<g text-anchor=\"middle\">\n");
    uint64_t step = r->n_layers > 24 ? (r->n_layers + 23) / 24 : 1;
    for (uint64_t l = 0; l < r->n_layers; l += step)
        tq_sb_printf(&b, "<text x=\"%.2f\" y=\"%d\">%llu</text>\n", px(r, l), plot_b + 18, (unsigned long long)l);
    tq_sb_printf(&b, "<text x=\"%d\" y=\"%d\">layer</text>\n</g>\n", (LEFT + plot_r) / 2, H - 12);
    tq_sb_printf(&b,
                 "<text transform=\"translate(18 %d) rotate(-90)\" text-anchor=\"middle\">"
                 "relative MSE &#931;(w&#770;&#8722;w)&#178;/&#931;w&#178;</text>\n",
                 (TOP + plot_b) / 2);
    tq_sb_printf(&b, "<path d=\"M%d %dV%dH%d\" fill=\"none\" stroke=\"#000000\"/>\n", LEFT, TOP, plot_b, plot_r);
    if (!r->n_layers)
        tq_sb_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no layers</text>\n", (LEFT + plot_r) / 2,
                     (TOP + plot_b) / 2);
    for (long c = 0; c < (long)r->n_classes; c++)
        if (plotted(r, (size_t)c))
            series(&b, r, c, ymax);
    series(&b, r, -1, ymax);
    /* legend */
    int row = 0;
    for (long c = -1; c < (long)r->n_classes; c++) {
        if (c >= 0 && !plotted(r, (size_t)c))
            continue;
        int y = TOP + 8 + 18 * row++;
        const char *col = c < 0 ? "#000000" : palette[(size_t)c % N_PALETTE];
        tq_sb_printf(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>\n<text x=\"%d\" y=\"%d\">",
                     plot_r + 16, y, plot_r + 36, y, col, plot_r + 42, y + 4);
        xml_text(&b, c < 0 ? "all (differing tensors)" : r->classes[c]);
        tq_sb_str(&b, "</text>\n");
    }
    tq_sb_str(&b, "</svg>\n");
    char *s = tq_sb_finish(&b, e);
    if (s && len)
        *len = strlen(s);
    return s;
}
