/* Files embedded in the petri binary (src/util/embed.S). */
#ifndef PETRI_EMBED_H
#define PETRI_EMBED_H

extern const char petri_driver_py[];
extern const char petri_driver_py_end[];
extern const char petri_run_js[];
extern const char petri_run_js_end[];
extern const char petri_profile_r[];
extern const char petri_profile_r_end[];
extern const char petri_run_java[];
extern const char petri_run_java_end[];
extern const char petri_pyext_so[];
extern const char petri_pyext_so_end[];
extern const char petri_pid1[];
extern const char petri_pid1_end[];
extern const char petri_openapi_json[];
extern const char petri_openapi_json_end[];
extern const char petri_web_index_html[];
extern const char petri_web_index_html_end[];
extern const char petri_web_app_js[];
extern const char petri_web_app_js_end[];
extern const char petri_web_app_css[];
extern const char petri_web_app_css_end[];
extern const char petri_web_plotly_frame_html[];
extern const char petri_web_plotly_frame_html_end[];
extern const char petri_web_plotly_frame_js[];
extern const char petri_web_plotly_frame_js_end[];
extern const char petri_web_html_frame_html[];
extern const char petri_web_html_frame_html_end[];
extern const char petri_web_html_frame_js[];
extern const char petri_web_html_frame_js_end[];

#endif
