"""FLOP formulas of the attention benchmark."""
import pytest

from rocm_stack_check.attention import Shape, backward_flops, forward_flops


def test_forward_flops_is_four_b_h_s_squared_d():
    assert forward_flops(Shape(2, 3, 5, 7), causal=False) == 4 * 2 * 3 * 5**2 * 7


def test_causal_halves_forward_and_backward_is_two_and_a_half_times_forward():
    shape = Shape(16, 16, 4096, 64)
    assert forward_flops(shape, causal=True) == forward_flops(shape, causal=False) / 2
    for causal in (True, False):
        assert backward_flops(shape, causal) == 2.5 * forward_flops(shape, causal)


def test_formulas_reproduce_the_figures_users_quote():
    # gfx1151, B=16 H=16 S=4096 D=64 causal: 68.5 ms forward = 8.03 TFLOP/s, 115.4 ms backward = 11.91.
    shape = Shape(16, 16, 4096, 64)
    assert forward_flops(shape, True) / 68.5e-3 / 1e12 == pytest.approx(8.03, abs=0.005)
    assert backward_flops(shape, True) / 115.4e-3 / 1e12 == pytest.approx(11.91, abs=0.005)


@pytest.mark.parametrize("text", ["1,2,3", "1,2,3,0", "a,b,c,d"])
def test_bad_shapes_are_refused(text):
    with pytest.raises(ValueError):
        Shape.parse(text)


def test_shape_round_trips_through_text():
    assert Shape.parse("16,16,4096,64") == Shape(16, 16, 4096, 64)
    assert str(Shape(1, 2, 3, 4)) == "1,2,3,4"
