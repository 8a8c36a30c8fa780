/* Files embedded so that petri is one binary: the Python driver
 * (docs/protocol.md), the template's C extension (src/runtime/pyext.c) and
 * the OpenAPI document (docs/openapi.json).  See src/runtime/embed.h. */
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

	.global petri_pyext_so
	.type petri_pyext_so, @object
	.balign 16
petri_pyext_so:
	.incbin "_petri.so"
	.global petri_pyext_so_end
	.type petri_pyext_so_end, @object
petri_pyext_so_end:
	.byte 0

	.global petri_openapi_json
	.type petri_openapi_json, @object
	.balign 16
petri_openapi_json:
	.incbin "openapi.json"
	.global petri_openapi_json_end
	.type petri_openapi_json_end, @object
petri_openapi_json_end:
	.byte 0

	.section .note.GNU-stack, "", @progbits
