#include "textflag.h"
#include "fold_amd64.h"

// func foldSSE(crc uint32, p []byte) uint32
//
// len(p) >= 64. crc and the result are the raw CRC register (reflected,
// no inversion).
TEXT ·foldSSE(SB), NOSPLIT, $0-36
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVL crc+0(FP), X0

	// Four lanes, the first one carrying the register.
	MOVOU 0(SI), X1
	MOVOU 16(SI), X2
	MOVOU 32(SI), X3
	MOVOU 48(SI), X4
	PXOR  X0, X1
	ADDQ  $64, SI
	SUBQ  $64, CX

	MOVOU ·foldK+0(SB), X0 // 512 bits
	CMPQ  CX, $64
	JB    sseReduce

sseLoop:
	MOVOU 0(SI), X9
	MOVOU 16(SI), X10
	MOVOU 32(SI), X11
	MOVOU 48(SI), X12
	FOLD1(X0, X1, X5, X9)
	FOLD1(X0, X2, X6, X10)
	FOLD1(X0, X3, X7, X11)
	FOLD1(X0, X4, X8, X12)
	ADDQ  $64, SI
	SUBQ  $64, CX
	CMPQ  CX, $64
	JAE   sseLoop

sseReduce:
	// Four lanes into one, each one lane (128 bits) ahead of the next.
	MOVOU ·foldK+16(SB), X0
	FOLD1(X0, X1, X5, X2)
	FOLD1(X0, X1, X5, X3)
	FOLD1(X0, X1, X5, X4)

	// Remaining whole 16-byte blocks.
	CMPQ CX, $16
	JB   finish

sseLoop16:
	MOVOU 0(SI), X9
	FOLD1(X0, X1, X5, X9)
	ADDQ  $16, SI
	SUBQ  $16, CX
	CMPQ  CX, $16
	JAE   sseLoop16

finish:
	// The CRC of the 128-bit remainder, then the tail under 16 bytes.
	CRC128
	CMPQ   CX, $8
	JB     tail1
	CRC32Q 0(SI), BX
	ADDQ   $8, SI
	SUBQ   $8, CX

tail1:
	TESTQ  CX, CX
	JZ     done
	CRC32B 0(SI), BX
	INCQ   SI
	DECQ   CX
	JMP    tail1

done:
	MOVL BX, ret+32(FP)
	RET

// func foldAVX512(crc uint32, p []byte) uint32
//
// Sixteen lanes in four ZMM registers, 256 bytes a round; inputs under 256
// bytes go to foldSSE (same frame, a tail call).
TEXT ·foldAVX512(SB), NOSPLIT, $0-36
	MOVQ p_len+16(FP), CX
	CMPQ CX, $256
	JAE  zBig
	JMP  ·foldSSE(SB)

zBig:
	MOVQ p_base+8(FP), SI
	MOVL  crc+0(FP), AX
	VMOVD AX, X0 // VEX: zeroes Z0 above the 32 bits

	VMOVDQU64 0(SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPXORQ    Z0, Z1, Z1
	ADDQ      $256, SI
	SUBQ      $256, CX

	VBROADCASTI32X4 ·foldK+32(SB), Z0 // 2048 bits
	CMPQ            CX, $256
	JB              zReduce

zLoop:
	FOLDZ(Z0, Z1, Z5, 0(SI))
	FOLDZ(Z0, Z2, Z6, 64(SI))
	FOLDZ(Z0, Z3, Z7, 128(SI))
	FOLDZ(Z0, Z4, Z8, 192(SI))
	ADDQ $256, SI
	SUBQ $256, CX
	CMPQ CX, $256
	JAE  zLoop

zReduce:
	REDUCE4Z

	CMPQ CX, $64
	JB   zLanes

zLoop64:
	FOLDZ(Z0, Z1, Z5, 0(SI))
	ADDQ $64, SI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  zLoop64

zLanes:
	// The four lanes of Z1 into X1, then as foldSSE does.
	LANES4

	// Remaining whole 16-byte blocks.
	CMPQ CX, $16
	JB   z_finish

z_sseLoop16:
	MOVOU 0(SI), X9
	FOLD1(X0, X1, X5, X9)
	ADDQ  $16, SI
	SUBQ  $16, CX
	CMPQ  CX, $16
	JAE   z_sseLoop16

z_finish:
	// The CRC of the 128-bit remainder, then the tail under 16 bytes.
	CRC128
	CMPQ   CX, $8
	JB     z_tail1
	CRC32Q 0(SI), BX
	ADDQ   $8, SI
	SUBQ   $8, CX

z_tail1:
	TESTQ  CX, CX
	JZ     z_done
	CRC32B 0(SI), BX
	INCQ   SI
	DECQ   CX
	JMP    z_tail1

z_done:
	MOVL BX, ret+32(FP)
	RET
