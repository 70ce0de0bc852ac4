"""The benchmark's timer against a simulated GPU whose calls cost the host time to launch: the figure must be
the kernel's time, not the kernel's plus the launch (issue 38: a 0.8 ms flash backward read 0.93-1.06 ms when
each timed batch held one call)."""
import pytest

from rocm_stack_check.bench import Timer, TimingSettings


class SimulatedGpu:
    """One stream. The host spends `launch_ms` preparing each call before it is queued; a queued call reaches the
    GPU `latency_ms` later and runs `kernel_ms` once the calls before it are done. Events are zero-length
    entries in the same queue."""

    def __init__(self, kernel_ms: float, launch_ms: float, latency_ms: float = 0.01):
        self.kernel_ms, self.launch_ms, self.latency_ms = kernel_ms, launch_ms, latency_ms
        self.host = 0.0
        self.gpu_free_at = 0.0
        self.calls = 0

    def _enqueue(self, duration: float) -> float:
        start = max(self.gpu_free_at, self.host + self.latency_ms)
        self.gpu_free_at = start + duration
        return self.gpu_free_at

    def launch(self):
        self.host += self.launch_ms
        self._enqueue(self.kernel_ms)
        self.calls += 1

    def synchronize(self):
        self.host = max(self.host, self.gpu_free_at)


class SimulatedTorch:
    def __init__(self, gpu: SimulatedGpu):
        gpu_ = gpu

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                self.at = gpu_._enqueue(0.0)

            def synchronize(self):
                gpu_.host = max(gpu_.host, self.at)

            def elapsed_time(self, other):
                return other.at - self.at

        class Cuda:
            pass

        self.cuda = Cuda()
        self.cuda.Event = Event
        self.cuda.synchronize = gpu.synchronize


def _measure(kernel_ms, launch_ms, settings):
    gpu = SimulatedGpu(kernel_ms, launch_ms)
    ms, reps, calls = Timer(SimulatedTorch(gpu), "cuda", settings).median_ms(gpu.launch)
    return ms, reps, calls


@pytest.mark.parametrize("settings", [TimingSettings(), TimingSettings(warmup=2, min_reps=3, max_reps=10,
                                                                       target_ms=60.0, batch_ms=5.0)],
                         ids=["full", "quick"])
@pytest.mark.parametrize("kernel_ms,launch_ms", [(0.8, 0.15), (0.32, 0.06), (0.03, 0.02), (8.0, 0.3)])
def test_launch_cost_stays_out_of_the_figure(settings, kernel_ms, launch_ms):
    ms, reps, calls = _measure(kernel_ms, launch_ms, settings)
    assert ms == pytest.approx(kernel_ms, rel=0.01)
    # every timed batch keeps the GPU busy for at least batch_ms, or is one call longer than that
    assert calls * kernel_ms >= settings.batch_ms or (calls == 1 and kernel_ms >= settings.batch_ms)
    assert settings.min_reps <= reps <= settings.max_reps


def test_a_batch_of_one_call_would_have_counted_the_launch():
    """What the old timing (batch_ms 1, one call per batch at 0.8 ms) read: the kernel plus the launch. The
    simulation shows the error the timer exists to avoid, so the test above can fail."""
    ms, _, calls = _measure(0.8, 0.15, TimingSettings(batch_ms=0.5))
    assert calls == 1 and ms == pytest.approx(0.8, rel=0.01)  # the untimed call ahead of the batch hides it
    gpu = SimulatedGpu(0.8, 0.15)
    torch = SimulatedTorch(gpu)
    start, end = torch.cuda.Event(), torch.cuda.Event()
    start.record()
    gpu.launch()
    end.record()
    assert start.elapsed_time(end) == pytest.approx(0.8 + 0.15)  # the launch, counted


def test_a_call_faster_than_its_launch_reads_the_launch_rate():
    """Where the host cannot keep up (a tiny shape), the honest figure is the rate calls can be issued at."""
    ms, _, calls = _measure(0.005, 0.02, TimingSettings())
    assert ms == pytest.approx(0.02, rel=0.02)
    assert calls == Timer.MAX_CALLS or calls * 0.02 >= TimingSettings().batch_ms
