"""`petri run` in every language of the table: JavaScript and R built in,
and a language of the configuration's, by name, alias and file extension."""
import base64

PERL = ('[language.perl]\nfile = main.pl\nrun = perl main.pl\naliases = pl\n'
        'extensions = .pl\n')


def test_javascript_value_and_error(petri_json):
    r = petri_json("console.log('hi'); [1, 2, 3].map(x => x * 2)", lang='js')
    assert r['status'] == 'ok' and r['stdout'] == 'hi\n', r.describe()
    assert r['results'] == [{'text/plain': '[ 2, 4, 6 ]'}]
    r = petri_json("null.x", lang='javascript')
    assert r['status'] == 'error' and r['error']['name'] == 'TypeError', r.describe()


def test_r_prints_and_plots(petri_json, tmp_path):
    script = tmp_path / 'plot.R'
    script.write_text('x <- c(2, 4, 9)\nmedian(x)\nbarplot(x)\n')
    r = petri_json(file=script)            # R by its extension
    # a value is a result, as IRkernel gives it (docs/languages.md), then the plot
    assert r['status'] == 'ok' and r['stdout'] == '', r.describe()
    assert r['results'][0]['text/plain'] == '[1] 4', r.describe()
    png = base64.b64decode(r['results'][1]['image/png'])
    assert png[:8] == b'\x89PNG\r\n\x1a\n'


def test_a_language_of_the_configuration(petri_json, tmp_path):
    cfg = tmp_path / 'petri.ini'
    cfg.write_text(PERL)
    code = tmp_path / 'answer.pl'
    code.write_text('print 6*7, "\\n";\n')
    r = petri_json(None, '--config', cfg, file=code)     # by its extension
    assert r['status'] == 'ok' and r['stdout'] == '42\n', r.describe()
    r = petri_json('print "alias"', '--config', cfg, lang='pl')
    assert r['stdout'] == 'alias', r.describe()


def test_without_the_configuration_the_language_is_unknown(petri_raw):
    r = petri_raw(['run', '-l', 'perl', '-c', 'print 1'], env={'PETRI_CONFIG': ''})
    assert r.rc == 2
    assert b"unknown language 'perl': must be python, bash, c, javascript, typescript, r or java" in r.stderr


def test_a_compile_error_is_printed_once(petri_raw):
    """The compiler's output goes to stderr as it comes; the CompileError
    that follows names it in one line instead of printing it again."""
    run = petri_raw(['run', '-l', 'c', '-c', 'int main(void) { return undeclared_name; }'])
    err = run.stderr.decode()
    assert run.rc == 1, err
    assert err.count('return undeclared_name;') == 1, err
    assert err.count('\nCompileError: ') == 1, err
