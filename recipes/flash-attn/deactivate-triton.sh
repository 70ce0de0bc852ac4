# flash-attn (Triton backend): undo activate.d/flash-attn-triton.sh.
unset FLASH_ATTENTION_TRITON_AMD_ENABLE
