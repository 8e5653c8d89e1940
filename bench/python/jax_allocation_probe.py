"""What a JAX load's device allocation costs on a GPU (issue 22): jtree's own
(`_jtree.device_memory`: cudaMalloc) against JAX's (`_device_jax.allocate`: zeros, one compiled
call per size), 1 GiB, the same size again, and another size. Run by bench/gpu_checks.sh;
needs JAX with a GPU and a jtree built with CUDA:

  python3 bench/python/jax_allocation_probe.py
"""
import time


def main() -> None:
    import jax

    from jtree import _device_jax, _jtree

    dev = jax.devices("gpu")[0]
    jax.device_put(jax.numpy.zeros(8), dev).block_until_ready()  # (JAX's start, not timed)
    sizes = (1 << 30, 1 << 30, (1 << 30) + 4096)
    for name, alloc in (("jtree device_memory", lambda n: _jtree.device_memory(
                            dev.local_hardware_id, n)),
                        ("JAX allocation", lambda n: _device_jax.allocate([dev], n))):
        t = [time.perf_counter()]
        for n in sizes:
            alloc(n)
            t.append(time.perf_counter())
        ms = [1e3 * (b - a) for a, b in zip(t, t[1:])]
        print(f"{name} of 1 GiB: first {ms[0]:.1f} ms, again {ms[1]:.1f} ms, "
              f"another size {ms[2]:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
