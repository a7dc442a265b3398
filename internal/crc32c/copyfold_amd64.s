#include "textflag.h"

// FOLD1C is fold_amd64.s's FOLD1, repeated here because a macro does not
// cross files: x = clmul(x.lo, k.lo) ^ clmul(x.hi, k.hi) ^ next.
#define FOLD1C(k, x, t, next) \
	MOVO      x, t          \
	PCLMULQDQ $0x00, k, x   \
	PCLMULQDQ $0x11, k, t   \
	PXOR      t, x          \
	PXOR      next, x

// FOLDZC is FOLDZ with next in a register (it was just stored to dst).
#define FOLDZC(k, z, t, next) \
	VPCLMULQDQ $0x00, k, z, t \
	VPCLMULQDQ $0x11, k, z, z \
	VPTERNLOGQ $0x96, next, t, z

// func copyFoldAVX512(crc uint32, first, dst, src []byte) uint32
//
// foldAVX512 over the 256 bytes of first followed by src, storing every
// block of src it loads to dst, so that src is read once: len(first) ==
// 256, len(dst) >= len(src), dst and src do not overlap. crc and the
// result are the raw CRC register.
TEXT ·copyFoldAVX512(SB), NOSPLIT, $0-84
	MOVQ first_base+8(FP), SI
	MOVL crc+0(FP), AX
	VMOVD AX, X0 // VEX: zeroes Z0 above the 32 bits

	VMOVDQU64 0(SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPXORQ    Z0, Z1, Z1

	MOVQ dst_base+32(FP), DI
	MOVQ src_base+56(FP), SI
	MOVQ src_len+64(FP), CX

	VBROADCASTI32X4 ·foldK+32(SB), Z0 // 2048 bits
	CMPQ            CX, $256
	JB              cReduce

cLoop:
	VMOVDQU64 0(SI), Z9
	VMOVDQU64 64(SI), Z10
	VMOVDQU64 128(SI), Z11
	VMOVDQU64 192(SI), Z12
	VMOVDQU64 Z9, 0(DI)
	VMOVDQU64 Z10, 64(DI)
	VMOVDQU64 Z11, 128(DI)
	VMOVDQU64 Z12, 192(DI)
	FOLDZC(Z0, Z1, Z5, Z9)
	FOLDZC(Z0, Z2, Z6, Z10)
	FOLDZC(Z0, Z3, Z7, Z11)
	FOLDZC(Z0, Z4, Z8, Z12)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $256, CX
	CMPQ CX, $256
	JAE  cLoop

cReduce:
	// Four registers into one, each 512 bits ahead of the next.
	VBROADCASTI32X4 ·foldK+0(SB), Z0
	FOLDZC(Z0, Z1, Z5, Z2)
	FOLDZC(Z0, Z1, Z5, Z3)
	FOLDZC(Z0, Z1, Z5, Z4)

	CMPQ CX, $64
	JB   cLanes

cLoop64:
	VMOVDQU64 0(SI), Z9
	VMOVDQU64 Z9, 0(DI)
	FOLDZC(Z0, Z1, Z5, Z9)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  cLoop64

cLanes:
	// The four lanes of Z1 into X1, X2, X3, X4, then as foldSSE does.
	VEXTRACTI32X4 $1, Z1, X2
	VEXTRACTI32X4 $2, Z1, X3
	VEXTRACTI32X4 $3, Z1, X4
	VZEROUPPER

	MOVOU ·foldK+16(SB), X0
	FOLD1C(X0, X1, X5, X2)
	FOLD1C(X0, X1, X5, X3)
	FOLD1C(X0, X1, X5, X4)

	// Remaining whole 16-byte blocks.
	CMPQ CX, $16
	JB   cFinish

cLoop16:
	MOVOU 0(SI), X9
	MOVOU X9, 0(DI)
	FOLD1C(X0, X1, X5, X9)
	ADDQ  $16, SI
	ADDQ  $16, DI
	SUBQ  $16, CX
	CMPQ  CX, $16
	JAE   cLoop16

cFinish:
	// The register is the CRC of the 128-bit remainder, from zero: two
	// CRC32 instructions give it exactly. Then the tail under 16 bytes.
	MOVQ   X1, AX
	PEXTRQ $1, X1, DX
	XORL   BX, BX
	CRC32Q AX, BX
	CRC32Q DX, BX
	CMPQ   CX, $8
	JB     cTail1
	MOVQ   0(SI), R8
	MOVQ   R8, 0(DI)
	CRC32Q R8, BX
	ADDQ   $8, SI
	ADDQ   $8, DI
	SUBQ   $8, CX

cTail1:
	TESTQ  CX, CX
	JZ     cDone
	MOVBLZX 0(SI), R8
	MOVB   R8, 0(DI)
	CRC32B R8, BX
	INCQ   SI
	INCQ   DI
	DECQ   CX
	JMP    cTail1

cDone:
	MOVL BX, ret+80(FP)
	RET
