#include "textflag.h"
#include "fold_amd64.h"

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
	FOLDZ(Z0, Z1, Z5, Z9)
	FOLDZ(Z0, Z2, Z6, Z10)
	FOLDZ(Z0, Z3, Z7, Z11)
	FOLDZ(Z0, Z4, Z8, Z12)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $256, CX
	CMPQ CX, $256
	JAE  cLoop

cReduce:
	REDUCE4Z

	CMPQ CX, $64
	JB   cLanes

cLoop64:
	VMOVDQU64 0(SI), Z9
	VMOVDQU64 Z9, 0(DI)
	FOLDZ(Z0, Z1, Z5, Z9)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  cLoop64

cLanes:
	// The four lanes of Z1 into X1, then as foldSSE does.
	LANES4

	// Remaining whole 16-byte blocks.
	CMPQ CX, $16
	JB   cFinish

cLoop16:
	MOVOU 0(SI), X9
	MOVOU X9, 0(DI)
	FOLD1(X0, X1, X5, X9)
	ADDQ  $16, SI
	ADDQ  $16, DI
	SUBQ  $16, CX
	CMPQ  CX, $16
	JAE   cLoop16

cFinish:
	// The CRC of the 128-bit remainder, then the tail under 16 bytes.
	CRC128
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
