# cross.mk - cross-platform checks, included from the Makefile.
#
#   make cross   vet and link the commands for linux/arm64, darwin/arm64 and windows/amd64
#                with CGO_ENABLED=0, then run the linux/arm64 tests under qemu-user if
#                qemu-aarch64-static is installed. See tools/cross.sh for the knobs:
#                CROSS_TARGETS (add darwin/amd64), CROSS_LINK_TESTS=1, CROSS_REQUIRE_QEMU=1.

.PHONY: cross

## cross: vet and link for linux/arm64, darwin/arm64, windows/amd64 (no cgo); run the
## linux/arm64 tests under qemu-user when installed (2 min warm, about 6 cold).
cross:
	GO=$(GO) tools/cross.sh
