/* Files embedded so that petri is one binary: the Python driver
 * (docs/protocol.md), the JavaScript, R and Java helpers (docs/languages.md), the
 * template's C extension (src/runtime/pyext.c), the pid 1 of its sandboxes
 * (src/jail/pid1.c),
 * the OpenAPI document (docs/openapi.json) and the web page's static files
 * (src/web, docs/web.md).  See src/util/embed.h. */
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

	.global petri_run_js
	.type petri_run_js, @object
	.balign 16
petri_run_js:
	.incbin "run.js"
	.global petri_run_js_end
	.type petri_run_js_end, @object
petri_run_js_end:
	.byte 0

	.global petri_profile_r
	.type petri_profile_r, @object
	.balign 16
petri_profile_r:
	.incbin "profile.R"
	.global petri_profile_r_end
	.type petri_profile_r_end, @object
petri_profile_r_end:
	.byte 0

	.global petri_run_java
	.type petri_run_java, @object
	.balign 16
petri_run_java:
	.incbin "Run.java"
	.global petri_run_java_end
	.type petri_run_java_end, @object
petri_run_java_end:
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

	.global petri_pid1
	.type petri_pid1, @object
	.balign 16
petri_pid1:
	.incbin "petri-init"
	.global petri_pid1_end
	.type petri_pid1_end, @object
petri_pid1_end:
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

	.global petri_web_index_html
	.type petri_web_index_html, @object
	.balign 16
petri_web_index_html:
	.incbin "index.html"
	.global petri_web_index_html_end
	.type petri_web_index_html_end, @object
petri_web_index_html_end:
	.byte 0

	.global petri_web_app_js
	.type petri_web_app_js, @object
	.balign 16
petri_web_app_js:
	.incbin "app.js"
	.global petri_web_app_js_end
	.type petri_web_app_js_end, @object
petri_web_app_js_end:
	.byte 0

	.global petri_web_app_css
	.type petri_web_app_css, @object
	.balign 16
petri_web_app_css:
	.incbin "app.css"
	.global petri_web_app_css_end
	.type petri_web_app_css_end, @object
petri_web_app_css_end:
	.byte 0

	.global petri_web_plotly_frame_html
	.type petri_web_plotly_frame_html, @object
	.balign 16
petri_web_plotly_frame_html:
	.incbin "plotly-frame.html"
	.global petri_web_plotly_frame_html_end
	.type petri_web_plotly_frame_html_end, @object
petri_web_plotly_frame_html_end:
	.byte 0

	.global petri_web_plotly_frame_js
	.type petri_web_plotly_frame_js, @object
	.balign 16
petri_web_plotly_frame_js:
	.incbin "plotly-frame.js"
	.global petri_web_plotly_frame_js_end
	.type petri_web_plotly_frame_js_end, @object
petri_web_plotly_frame_js_end:
	.byte 0

	.global petri_web_html_frame_html
	.type petri_web_html_frame_html, @object
	.balign 16
petri_web_html_frame_html:
	.incbin "html-frame.html"
	.global petri_web_html_frame_html_end
	.type petri_web_html_frame_html_end, @object
petri_web_html_frame_html_end:
	.byte 0

	.global petri_web_html_frame_js
	.type petri_web_html_frame_js, @object
	.balign 16
petri_web_html_frame_js:
	.incbin "html-frame.js"
	.global petri_web_html_frame_js_end
	.type petri_web_html_frame_js_end, @object
petri_web_html_frame_js_end:
	.byte 0

	.section .note.GNU-stack, "", @progbits
