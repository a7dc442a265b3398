// The folding steps fold_amd64.s and copyfold_amd64.s share. A macro is
// textual, so each file that includes this one assembles its own copy.

// FOLD1 advances the 128-bit lane x by the distance whose key pair is in k
// and XORs in the block next: x = clmul(x.lo, k.lo) ^ clmul(x.hi, k.hi) ^ next.
// t is clobbered.
#define FOLD1(k, x, t, next) \
	MOVO      x, t          \
	PCLMULQDQ $0x00, k, x   \
	PCLMULQDQ $0x11, k, t   \
	PXOR      t, x          \
	PXOR      next, x

// FOLDZ advances the four 128-bit lanes of z like FOLD1 does one, with the
// key pair broadcast in k; next is a register or a memory operand.
#define FOLDZ(k, z, t, next) \
	VPCLMULQDQ $0x00, k, z, t \
	VPCLMULQDQ $0x11, k, z, z \
	VPTERNLOGQ $0x96, next, t, z

// REDUCE4Z folds Z2, Z3 and Z4 into Z1, each 512 bits ahead of the next,
// and leaves the 512-bit key pair broadcast in Z0 (for the 64-byte loop
// that may follow). Z5 is clobbered.
#define REDUCE4Z \
	VBROADCASTI32X4 ·foldK+0(SB), Z0 \
	FOLDZ(Z0, Z1, Z5, Z2)            \
	FOLDZ(Z0, Z1, Z5, Z3)            \
	FOLDZ(Z0, Z1, Z5, Z4)

// LANES4 folds the four lanes of Z1 into X1, each one lane (128 bits)
// ahead of the next, leaves the 128-bit key pair in X0 for the 16-byte
// loop that may follow, and leaves the upper halves of the vector
// registers clean (VZEROUPPER) for the SSE code after it. X2 to X5 are
// clobbered.
#define LANES4 \
	VEXTRACTI32X4 $1, Z1, X2    \
	VEXTRACTI32X4 $2, Z1, X3    \
	VEXTRACTI32X4 $3, Z1, X4    \
	VZEROUPPER                  \
	MOVOU ·foldK+16(SB), X0     \
	FOLD1(X0, X1, X5, X2)       \
	FOLD1(X0, X1, X5, X3)       \
	FOLD1(X0, X1, X5, X4)

// CRC128 leaves in BX the CRC of the 128-bit remainder in X1, from zero:
// two CRC32 instructions give it exactly. AX and DX are clobbered.
#define CRC128 \
	MOVQ   X1, AX     \
	PEXTRQ $1, X1, DX \
	XORL   BX, BX     \
	CRC32Q AX, BX     \
	CRC32Q DX, BX
