// Draws figures built as Plotly JSON (see plot.rs) with plotly.js, which
// the app serves in two builds (scripts/build-site.sh, plot.rs plotly_for):
// the partial bundle of 2D traces, a third the size of the whole library
// and as much quicker to start, and the whole for the rest (box plots, 3D)
// and for pages whose head preloads it.
// The same addresses as plot.rs's PLOTLY_PARTIAL and PLOTLY_WHOLE.
const PARTIAL = "/pkg/plotly-gl2d.min.js";
const WHOLE = "/pkg/plotly.min.js";
const PARTIAL_TYPES = new Set(["scatter", "scattergl", "splom", "parcoords"]);

const builds = new Map();
let one_at_a_time = Promise.resolve();
function plotly(src) {
    if (!builds.has(src)) {
        // Each build sets window.Plotly as it runs: they run in turn.
        const loaded = one_at_a_time.then(() => new Promise((resolve, reject) => {
            // Fetched already where the page's head preloads it.
            const s = document.createElement("script");
            s.src = src;
            s.onload = () => resolve(window.Plotly);
            s.onerror = () => reject(new Error(src + " could not be loaded"));
            document.head.appendChild(s);
        }));
        one_at_a_time = loaded.catch(() => {});
        builds.set(src, loaded);
    }
    return builds.get(src);
}
// The build the page's head preloads, if any: its choice for the page.
const preferred = () =>
    document.querySelector('link[rel="preload"][as="script"][href^="/pkg/plotly"]')?.getAttribute("href");
const fits_partial = (fig) => fig.data.every((t) => PARTIAL_TYPES.has(t.type || "scatter"));

// What a click on point `trial` does: the app's handler once it has given
// one, else (before the app starts) the address the element names.
function click_point(div, trial) {
    if (div.tunebookOnClick) div.tunebookOnClick(trial);
    else if (div.dataset.pointHref) location.assign(div.dataset.pointHref + trial);
}
function clicks(gd, onClick) {
    if (!gd) return;
    if (onClick) gd.tunebookOnClick = onClick;
    if (gd.dataset.clicks || !(gd.tunebookOnClick || gd.dataset.pointHref)) return;
    gd.dataset.clicks = "1";
    gd.on("plotly_click", (ev) => {
        const p = ev.points && ev.points[0];
        if (p && p.customdata != null) click_point(gd, Number(p.customdata));
    });
}

async function show(id, fig, onClick) {
    // An element stays with the build that drew it while that build can.
    const drawn_by = document.getElementById(id)?.tunebookPlotly;
    const src = drawn_by === WHOLE || preferred() === WHOLE || !fits_partial(fig) ? WHOLE : PARTIAL;
    const Plotly = await plotly(src);
    performance.mark("tunebook:plotly-ready:" + id);
    const div = document.getElementById(id);
    if (!div) return;
    if (div.tunebookPlotly && div.tunebookPlotly !== src) {
        (await plotly(div.tunebookPlotly)).purge(div);
        delete div.dataset.clicks;
    }
    const count = (t) => (t.x || (t.dimensions && t.dimensions[0].values) || []).length;
    if (fig.data.every((t) => count(t) === 0)) {
        // Nothing to draw: no empty axes (the page says why it is empty).
        if (div.tunebookPlotly) Plotly.purge(div);
        delete div.tunebookPlotly;
        delete div.dataset.clicks;
        div.dataset.drawn = "0";
        return;
    }
    div.tunebookPlotly = src;
    const gd = await Plotly.react(div, fig.data, fig.layout, { responsive: true, displaylogo: false });
    div.querySelector(":scope > .plot-preview")?.remove();
    gd.dataset.drawn = String(fig.data.reduce((n, t) => n + count(t), 0));
    performance.mark("tunebook:plot-drawn:" + id);
    clicks(gd, onClick);
}

export function draw(id, figure, onClick) {
    // onClick: a function, or undefined for a plot without clicks. Where
    // plotly.js cannot be had, the page goes on without the plot (the
    // failed load is in the console already).
    return show(id, JSON.parse(figure), onClick).catch((e) => {
        console.warn("plot " + id + " not drawn: " + e.message);
    });
}

// The draw under way or done for each element: its address and its promise.
const drawing = new Map();
export function draw_from(id, url, onClick, fresh) {
    const prior = drawing.get(id);
    const div = document.getElementById(id);
    if (div && onClick) div.tunebookOnClick = onClick;
    if (!fresh && prior && prior.url === url) {
        return prior.promise.then((meta) => {
            clicks(document.getElementById(id), onClick);
            return meta;
        });
    }
    const promise = fetch(url, fresh ? { cache: "no-store" } : {})
        .then((r) => (r.ok ? r.json() : r.text().then((t) => Promise.reject(new Error(t)))))
        .then((answer) => {
            performance.mark("tunebook:figure-arrived:" + id);
            const meta = JSON.stringify({ ...answer, figure: null });
            // A later draw of this element took over.
            if (drawing.get(id).promise !== promise) return meta;
            const div = document.getElementById(id);
            if (div && !div.tunebookPlotly) preview(div, answer.figure);
            return show(id, answer.figure, onClick).then(() => meta);
        });
    drawing.set(id, { url, promise });
    return promise;
}

// A first look while plotly.js starts, which on a slow machine's first
// visit takes more than a second: a 2D figure's points on a canvas, each
// with its hover text and its click, until plotly.js has drawn the figure
// (or for good, should plotly.js not load).
function preview(div, fig) {
    const traces = fig.data.filter((t) => (t.type === "scatter" || t.type === "scattergl") && t.x);
    if (traces.length !== fig.data.length || !traces.some((t) => t.x.length)) return;
    div.querySelector(":scope > .plot-preview")?.remove();
    const width = div.clientWidth || 700;
    const height = div.clientHeight || 450;
    const m = { l: 80, r: 80, t: 100, b: 80, ...fig.layout.margin };
    const xs = axis(traces.map((t) => t.x), m.l, width - m.r);
    const ys = axis(traces.map((t) => t.y), height - m.b, m.t);

    const box = document.createElement("div");
    box.className = "plot-preview";
    const canvas = document.createElement("canvas");
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    const tip = document.createElement("div");
    tip.className = "plot-preview-tip";
    tip.hidden = true;
    box.append(canvas, tip);
    div.append(box);

    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.font = "12px sans-serif";
    ctx.fillStyle = "#444";
    ctx.strokeStyle = "#eee";
    for (const v of xs.ticks) {
        const x = xs.at(v);
        ctx.beginPath(); ctx.moveTo(x, m.t); ctx.lineTo(x, height - m.b); ctx.stroke();
        ctx.textAlign = "center";
        ctx.fillText(xs.label(v), x, height - m.b + 16);
    }
    for (const v of ys.ticks) {
        const y = ys.at(v);
        ctx.beginPath(); ctx.moveTo(m.l, y); ctx.lineTo(width - m.r, y); ctx.stroke();
        ctx.textAlign = "right";
        ctx.fillText(ys.label(v), m.l - 6, y + 4);
    }
    ctx.textAlign = "center";
    ctx.fillText(fig.layout.xaxis?.title?.text || "", m.l + (width - m.l - m.r) / 2, height - m.b + 40);
    ctx.save();
    ctx.translate(m.l - 55, m.t + (height - m.t - m.b) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(fig.layout.yaxis?.title?.text || "", 0, 0);
    ctx.restore();

    // Every point where it is drawn, for hovers and clicks.
    const points = [];
    for (const t of traces) {
        const px = t.x.map(xs.at), py = t.y.map(ys.at);
        const marker = t.marker || {}, r = (marker.size || 6) / 2;
        ctx.globalAlpha = 1;
        if ((t.mode || "").includes("lines") && px.length > 1) {
            ctx.strokeStyle = t.line?.color || marker.color || "#444";
            ctx.beginPath();
            ctx.moveTo(px[0], py[0]);
            for (let i = 1; i < px.length; i++) {
                if (t.line?.shape === "hv") ctx.lineTo(px[i], py[i - 1]);
                ctx.lineTo(px[i], py[i]);
            }
            ctx.stroke();
        }
        ctx.globalAlpha = marker.opacity ?? 1;
        ctx.fillStyle = marker.color || "#1f77b4";
        ctx.beginPath();
        for (let i = 0; i < px.length; i++) {
            ctx.moveTo(px[i] + r, py[i]);
            ctx.arc(px[i], py[i], r, 0, 2 * Math.PI);
            points.push({ x: px[i], y: py[i], t, i });
        }
        ctx.fill();
    }

    const nearest = (ev) => {
        const rect = canvas.getBoundingClientRect();
        const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
        let best = null, best_d = 100; // within 10 px
        for (const p of points) {
            const d = (p.x - x) ** 2 + (p.y - y) ** 2;
            if (d <= best_d) { best = p; best_d = d; }
        }
        return best;
    };
    canvas.addEventListener("mousemove", (ev) => {
        const p = nearest(ev);
        canvas.style.cursor = p ? "pointer" : "";
        tip.hidden = !p;
        if (!p) return;
        const { t, i } = p;
        tip.textContent = [`trial ${t.customdata?.[i]}`, t.text?.[i], `${number(t.x[i])}, ${number(t.y[i])}`]
            .filter((line) => line != null).join("\n");
        tip.style.left = p.x + 12 + "px";
        tip.style.top = p.y + 12 + "px";
    });
    canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
    canvas.addEventListener("click", (ev) => {
        const p = nearest(ev);
        const trial = p?.t.customdata?.[p.i];
        if (trial != null) click_point(div, Number(trial));
    });
    div.dataset.preview = String(points.length);
    performance.mark("tunebook:preview-drawn:" + div.id);
}

// A value as the hover text shows it: four figures, or whole with commas.
const number = (v) =>
    Math.abs(v) >= 1e4 ? v.toLocaleString("en", { maximumFractionDigits: 0 }) : String(Number(v.toPrecision(4)));

// An axis over every value of `lists`, drawn from pixel `from` to `to`:
// where a value goes, round ticks and their labels (k, M, G as plotly.js).
function axis(lists, from, to) {
    let lo = Infinity, hi = -Infinity;
    for (const list of lists) for (const v of list) { if (v < lo) lo = v; if (v > hi) hi = v; }
    const pad = hi > lo ? (hi - lo) * 0.05 : Math.abs(lo) * 0.05 || 1;
    lo -= pad; hi += pad;
    const raw = (hi - lo) / 6, p = 10 ** Math.floor(Math.log10(raw)), f = raw / p;
    const step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) ticks.push(v);
    const e = Math.max(0, Math.min(4, Math.floor(Math.log10(Math.max(Math.abs(lo), Math.abs(hi))) / 3)));
    const unit = 10 ** (3 * e), digits = Math.max(0, -Math.floor(Math.log10(step / unit) + 1e-9));
    return {
        at: (v) => from + ((v - lo) / (hi - lo)) * (to - from),
        ticks,
        label: (v) => (v / unit).toFixed(digits) + ["", "k", "M", "G", "T"][e],
    };
}

// Before the app starts: draw what the page names.
for (const div of document.querySelectorAll("[data-figure-src]")) {
    draw_from(div.id, div.dataset.figureSrc, undefined, false).catch(() => {});
}
