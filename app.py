"""The specviz dashboard, as a Hugging Face Space runs it: `python app.py` (http://127.0.0.1:7860).

GRADIO_SERVER_NAME / GRADIO_SERVER_PORT change the address; the page itself is `specviz.app.ui`.
"""

try:  # on a ZeroGPU Space, spaces must load before torch touches CUDA; elsewhere it changes nothing
    import spaces  # noqa: F401
except ImportError:
    pass

from specviz.app.ui import main  # noqa: E402

if __name__ == "__main__":
    main()
