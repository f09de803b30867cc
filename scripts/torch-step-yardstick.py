"""PyTorch's own training step on lcx's default network, as a yardstick for
lcx's step: the same MLP (input → hidden × layers → 22, ReLU), batch,
masked MSE loss, global-norm clip and AdamW, timed in eager PyTorch with its
fused AdamW, with its foreach AdamW, and with AMP: on CUDA fp16 autocast
with a GradScaler, on a CPU bf16 autocast (torch.autocast("cpu",
dtype=torch.bfloat16), no scaler: bf16 has fp32's exponent range), which is
what lcx's `run.use_amp` runs on each. On CUDA also the whole fp32 step
captured once as a CUDA graph and replayed (torch.cuda.graph, the
documented whole-network capture: batches gathered on the device from a
copy of the data into static inputs, capturable fused AdamW). AMP is not
graphed here: GradScaler.step reads the overflow flag back to the host,
which a capture forbids.

    python3 scripts/torch-step-yardstick.py [--input 297] [--hidden 512]
        [--layers 3] [--batch 1024] [--steps 300] [--device cuda]
        [--threads N] [--only fp32|amp] [--lines N]

Prints one line per variant: ms per step (mean over --steps after a
warm-up). With --lines N (and --only), prints N JSON metric lines instead,
each the mean over --steps steps, for an experiment's `command` arm:
{"iteration": i, "bench/ms_per_step": ms, "precision": …,
"precision_requested": …, "training_kernel": "libtorch …"}.
"""
import json
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", type=int, default=297)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rows", type=int, default=131072)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--only", choices=["fp32", "amp"],
                    help="time one variant: fp32 (fused AdamW) or AMP")
    ap.add_argument("--lines", type=int, default=0,
                    help="print this many JSON metric lines (needs --only)")
    a = ap.parse_args()
    if a.lines and not a.only:
        ap.error("--lines needs --only fp32 or --only amp")
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(1)
    x_all = torch.randn(a.rows, a.input)
    y_all = torch.randn(a.rows, 22) * 20
    m_all = (torch.rand(a.rows, 22) < 0.75).float()

    def net():
        dims = [a.input] + [a.hidden] * a.layers
        mods = []
        for i, o in zip(dims, dims[1:]):
            mods += [torch.nn.Linear(i, o), torch.nn.ReLU()]
        mods.append(torch.nn.Linear(dims[-1], 22))
        return torch.nn.Sequential(*mods).to(dev)

    # AMP as lcx runs it: fp16 with loss scaling on CUDA, bf16 on a CPU.
    amp_dtype = torch.float16 if dev.type == "cuda" else torch.bfloat16

    def run(label, fused, foreach, amp):
        model = net()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4,
                                fused=fused, foreach=foreach)
        scaler = torch.amp.GradScaler(dev.type, enabled=amp and dev.type == "cuda")

        def step():
            # Batches drawn on the host, as lcx draws them, then copied.
            idx = torch.randint(0, a.rows, (a.batch,))
            x = x_all[idx].to(dev, non_blocking=True)
            y = y_all[idx].to(dev, non_blocking=True)
            m = m_all[idx].to(dev, non_blocking=True)
            with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp):
                out = model(x)
            loss = (((out.float() - y) ** 2) * m).sum() / m.sum().clamp_min(1)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()

        timed(label, step, amp)

    def mean_ms(step):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / a.steps

    def timed(label, step, amp=False):
        for _ in range(20):
            step()
        if a.lines:
            precision = ("amp" if dev.type == "cuda" else "bf16") if amp else "fp32"
            kernel = f"libtorch {torch.__version__}" + (
                f" autocast {str(amp_dtype).removeprefix('torch.')}" if amp else "")
            for i in range(1, a.lines + 1):
                print(json.dumps({
                    "iteration": i,
                    "bench/ms_per_step": mean_ms(step),
                    "precision": precision,
                    "precision_requested": "amp" if amp else "fp32",
                    "training_kernel": kernel,
                }), flush=True)
            return
        ms = mean_ms(step)
        print(f"torch {torch.__version__} {label}: {ms:.3f} ms/step "
              f"(batch {a.batch}, {a.input}→{a.hidden}×{a.layers}→22, "
              f"{torch.get_num_threads()} threads)", flush=True)

    def run_graphed(label):
        model = net()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4,
                                fused=True, capturable=True)
        x_dev, y_dev, m_dev = x_all.to(dev), y_all.to(dev), m_all.to(dev)
        idx = torch.randint(0, a.rows, (a.batch,), device=dev)

        def body():
            x, y, m = x_dev[idx], y_dev[idx], m_dev[idx]
            loss = (((model(x) - y) ** 2) * m).sum() / m.sum().clamp_min(1)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        # Warm-up on a side stream, then capture with the gradients unset,
        # so that the captured backward writes them rather than adds.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            body()

        def step():
            torch.randint(0, a.rows, (a.batch,), out=idx)
            graph.replay()

        timed(label, step)

    amp_label = "AMP fp16, fused AdamW" if dev.type == "cuda" else "AMP bf16 autocast, fused AdamW"
    if a.only == "fp32":
        run("fp32, fused AdamW", True, None, False)
        return
    if a.only == "amp":
        run(amp_label, True, None, True)
        return
    run("fp32, fused AdamW", True, None, False)
    run("fp32, foreach AdamW", None, True, False)
    run(amp_label, True, None, True)
    if dev.type == "cuda":
        run_graphed("fp32, CUDA graph, fused AdamW")
    else:
        print("fp32, CUDA graph: skipped, it needs a CUDA device", flush=True)


if __name__ == "__main__":
    main()
