# flash-attn (Triton backend): flash_attn selects its backend from this variable at import time;
# without it, it looks for the CK extension this build does not have.
export FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE
