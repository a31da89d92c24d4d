from pathlib import Path

parts = sorted(Path('src').glob('*.txt'))
Path('dist/bundle.txt').write_text(''.join(p.read_text() for p in parts))
