// The epilogue chain's knobs, defaulted to none, for kernels that run the chain alone (epilogue/apply.cu,
// epilogue/in_place.cu): EPI_OP1 .. EPI_OP4 are lab_epilogue.cuh's op codes (0 = none), EPI_OUT
// the output type (0: the 16-bit type; 1 int8, 2 fp8 e4m3), EPI_QROW a quantization scale per row (1) or one (0), BF16
// the 16-bit type.
#pragma once

#ifndef BF16
#define BF16 0
#endif
#ifndef EPI_OP1
#define EPI_OP1 0
#endif
#ifndef EPI_OP2
#define EPI_OP2 0
#endif
#ifndef EPI_OP3
#define EPI_OP3 0
#endif
#ifndef EPI_OP4
#define EPI_OP4 0
#endif
#ifndef EPI_OUT
#define EPI_OUT 0
#endif
#ifndef EPI_QROW
#define EPI_QROW 0
#endif
