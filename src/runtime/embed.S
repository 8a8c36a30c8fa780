/* The Python driver, embedded so that petri is one binary.  See
 * src/runtime/embed.h and docs/protocol.md. */
	.section .rodata
	.global petri_driver_py
	.type petri_driver_py, @object
	.balign 16
petri_driver_py:
	.incbin "driver.py"
	.global petri_driver_py_end
	.type petri_driver_py_end, @object
petri_driver_py_end:
	.byte 0

	.section .note.GNU-stack, "", @progbits
