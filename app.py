"""The specviz dashboard, as a Hugging Face Space runs it: `python app.py` (http://127.0.0.1:7860).

GRADIO_SERVER_NAME / GRADIO_SERVER_PORT change the address; the page itself is `specviz.app.ui`.
"""

from specviz.app.ui import main

if __name__ == "__main__":
    main()
