# flash-attn-rocm (Triton backend): undo activate.d/flash-attn-rocm-triton.sh.
unset FLASH_ATTENTION_TRITON_AMD_ENABLE
