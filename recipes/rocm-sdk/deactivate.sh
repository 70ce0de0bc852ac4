# rocm-sdk: nothing to restore (activate.sh sets nothing today; rocm-sdk-devel restores its own settings).
